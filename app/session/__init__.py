"""The Qt-free translation session: the one sentence pipeline (split, translation memory,
translation cache, terms, engine, doubts) that the window's worker, the command line, document
jobs and the local server all call, and the parts it is made of."""
