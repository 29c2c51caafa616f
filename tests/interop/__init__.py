"""Interop tests: real SDK clients against real SDK servers, in subprocesses."""
