"""Training, evaluation and research tools of the embedded nano pairs.

This package imports the runtime (``models``, ``mudiff_viz``) and is never imported by it: the app,
the CLI and the backends load shipped weights and need none of this (tests/test_architecture.py).
"""
