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
import torch  # noqa: E402

# One torch thread per test process: pytest-xdist runs the test files in parallel (pyproject.toml),
# one worker per core, and the tiny models gain little from a second thread anyway.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict:
    """Random-weight nano twins in the shipped layout (config.json + model.safetensors): real code
    paths end to end without the trained weights."""
    from tests.ui_support import tiny_twin

    return {kind: tiny_twin(kind, tmp_path_factory.mktemp(f"nano-{kind}")) for kind in ("diffusion", "ar")}


# Browser tests (test_*browser*.py). Module-scoped: each module gets its own app and Chromium, so a
# module's state never leaks into another's, and only one Playwright loop runs at a time.
@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's package, through Playwright)."""
    from tests.ui_support import launched_browser

    with launched_browser() as b:
        yield b


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """The app served on localhost, on random-weight nano twins (tests/ui_support.py)."""
    from tests.ui_support import launched_app, make_tiny_twins

    with launched_app(make_tiny_twins(tmp_path_factory.mktemp("models"))) as url:
        yield url


@pytest.fixture
def page(browser, app_url):
    """A fresh tab on the app, its JavaScript errors failing the test."""
    from tests.ui_support import app_page

    with app_page(browser, app_url) as pg:
        yield pg
