"""Serve the app as ``python app.py`` does, on nano twins from a given folder (for the load test).

    python -m tests.app_server MODELS_DIR PORT

Runs in its own process so the load test can measure the server's memory apart from its clients.
Prints ``ready`` once the server answers, then serves until killed.
"""

from __future__ import annotations

import sys


def main(models_dir: str, port: int) -> None:
    import torch

    torch.set_num_threads(1)
    from mudiff_viz.ui.serve import serve

    serve(port, models_dir)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
