"""Test-wide settings: no network, no analytics, loopback not proxied."""

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
os.environ["no_proxy"] = "127.0.0.1,localhost"
os.environ.pop("MUDIFF_ALLOW_HUB", None)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict:
    """Random-weight nano twins in the shipped layout (config.json + model.safetensors): real code
    paths end to end without the trained weights."""
    from tests.ui_support import tiny_twin

    return {kind: tiny_twin(kind, tmp_path_factory.mktemp(f"nano-{kind}")) for kind in ("diffusion", "ar")}
