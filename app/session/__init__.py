"""The Qt-free translation pipeline, the one there is (split, translation memory,
translation cache, terms, engine, doubts) that the window's worker, the command line, document
jobs and the local server all call, and the parts it is made of."""
