"""Serve the app as ``python app.py`` does, in a process of its own (the load test's server, whose
memory it measures apart from its clients)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def serve(port: int, models_dir: str | None = None) -> None:
    """The app as ``python app.py`` serves it (optionally on other nano weights), until killed."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    if models_dir:
        from models import registry

        registry.NANO_DIR = Path(models_dir)
    from mudiff_viz.ui.app import build_app, configure_queue, launch_kwargs

    demo = build_app()
    kwargs = {**launch_kwargs(), "server_name": "127.0.0.1", "server_port": port}
    configure_queue(demo).launch(prevent_thread_lock=True, quiet=True, **kwargs)
    print("ready", flush=True)
    while True:
        time.sleep(3600)
