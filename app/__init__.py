"""The Dragoman application: the Qt window, the engine worker thread, settings, installed models, command line."""

__version__ = "0.1.0"
