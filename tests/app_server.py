"""Serve the app as ``python app.py`` does, on nano twins from a given folder (for the load test).

    python -m tests.app_server MODELS_DIR PORT

Runs in its own process so the load test can measure the server's memory apart from its clients.
Prints ``ready`` once the server answers, then serves until killed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main(models_dir: str, port: int) -> None:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    import torch

    torch.set_num_threads(1)
    from models import registry

    registry.NANO_DIR = Path(models_dir)
    from mudiff_viz.ui.app import build_app, configure_queue, launch_kwargs

    demo = build_app()
    kwargs = {**launch_kwargs(), "server_name": "127.0.0.1", "server_port": port}
    configure_queue(demo).launch(prevent_thread_lock=True, quiet=True, **kwargs)
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
