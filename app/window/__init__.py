"""The Qt window: widgets, dialogs, and the worker thread that adapts the translation pipeline
(app.session) to Qt signals. Nothing here computes a translation."""
