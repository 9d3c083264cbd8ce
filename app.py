"""Gradio entry point (Hugging Face Spaces ``app_file``): builds the UI and launches it."""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from mudiff_viz.ui.app import build_app, configure_queue, launch_kwargs  # noqa: E402

demo = build_app()

if __name__ == "__main__":
    configure_queue(demo).launch(**launch_kwargs())
