"""The Dragoman application: the Qt window, the engine worker thread, settings and installed models."""
