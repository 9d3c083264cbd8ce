"""Shared by the app and browser tests: tiny random nano twins, and the app launched around them.

The twins have the shipped layout (config.json + model.safetensors) but random weights and a
24-token answer cap, so a whole sample page decodes in a few seconds on one CPU thread. They are
written to a pytest temporary folder and the registry is pointed at them, so the tests depend on
neither the trained weights nor anything outside the repository.
"""

from __future__ import annotations

import json

import os
import socket
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "samples" / "courier-short.pdf"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def require_chromium():
    """Skip the calling test module, with the reason, unless Debian's Chromium and the playwright
    package are both here (`.ci/run` installs Chromium); returns ``playwright.sync_api``."""
    import pytest

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium package (apt-get install chromium)",
                    allow_module_level=True)
    return pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")


@contextmanager
def launched_browser():
    """Headless Chromium through Playwright, closed on exit."""
    sync_api = require_chromium()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def tiny_twin(kind: str, out_dir: Path, max_answer: int = 24) -> Path:
    """One random-weight twin of the shipped embedded family (``registry.SHIPPED['nano']``) in its
    on-disk layout: config.json + model.safetensors (+ the shipped tokenizer.json for the subword
    pair). One layer, 64 wide, a 24-token answer cap."""
    import torch

    from models import registry

    torch.manual_seed(0)
    if registry.SHIPPED["nano"] == "nano-char":
        from models.nano.model import NanoConfig
        from models.nano_char.model import NanoOCR
        from models.nano_char.weights import save_model

        cfg = NanoConfig.character(kind=kind, d_model=64, n_layers=1, n_heads=2, mlp_hidden=128, enc_dim=64, enc_layers=1,
                         conv_channels=(8, 16, 16, 16), max_answer=max_answer)
        save_model(NanoOCR(cfg), out_dir)
        return out_dir
    from models.nano.model import NanoConfig, NanoOCR
    from models.nano.weights import save_model

    cfg = NanoConfig(kind=kind, d_model=64, n_layers=1, n_heads=2, mlp_hidden=128, enc_dim=64, enc_layers=1,
                     conv_channels=(8, 16, 16, 16), max_answer=max_answer)
    save_model(NanoOCR(cfg), out_dir, tokenizer=registry.NANO_DIR / f"{registry.SHIPPED['nano']}-ar" / "tokenizer.json")
    return out_dir


def make_tiny_twins(folder: Path, max_answer: int = 24) -> Path:
    """Both tiny twins under ``folder`` with the shipped folder names (point registry.NANO_DIR at it)."""
    from models import registry

    for kind in ("diffusion", "ar"):
        tiny_twin(kind, folder / f"{registry.SHIPPED['nano']}-{kind}", max_answer)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def launched_app(models_dir: Path):
    """The real app (app.build_app + launch_kwargs) on a free port, with the nano twins in ``models_dir``."""
    import torch

    from models import registry

    torch.set_num_threads(1)
    old_dir = registry.NANO_DIR
    registry.NANO_DIR = models_dir
    registry._cache.clear()
    from mudiff_viz.ui.app import build_app, configure_queue, launch_kwargs

    demo = build_app()
    kwargs = {**launch_kwargs(), "server_port": free_port(), "server_name": "127.0.0.1"}
    configure_queue(demo)
    demo.launch(prevent_thread_lock=True, quiet=True, **kwargs)
    url = f"http://127.0.0.1:{kwargs['server_port']}/"
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(url + "gradio_api/info", timeout=5).read()
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        yield url
    finally:
        demo.close()
        registry.NANO_DIR = old_dir
        registry._cache.clear()


@contextmanager
def app_page(browser, url: str):
    """A fresh 1400x1000 page of the app at ``url``; the test fails on any JavaScript error."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(url)
    pg.wait_for_selector(".gradio-container")
    try:
        yield pg
    finally:
        ctx.close()
    assert not errors, f"JavaScript errors: {errors}"


def upload(pg, prefix: str, path, shows: str | None = None) -> None:
    """Replace the ``prefix`` tab's page with the file at ``path`` and wait until its page-info line
    shows ``shows`` (default: the file's name; "⚠" for a file it refuses)."""
    pg.click(f"#{prefix}-input button[aria-label='Clear']")
    pg.set_input_files(f"#{prefix}-input input[type=file]", str(path))
    expected = Path(path).name if shows is None else shows
    pg.wait_for_function("([id, text]) => document.querySelector(id).innerText.includes(text)",
                         arg=[f"#{prefix}-page-info", expected], timeout=30_000)


def player_loads(pg, root: str = "#player") -> int:
    """How many values the player at ``root`` has received (its mount's data-loads)."""
    return pg.evaluate("(root) => { const m = document.querySelector(root + ' .mp-mount'); return m ? +(m.dataset.loads || 0) : 0; }",
                       root)


def wait_for_result(pg, root: str = "#player", timeout: int = 120_000, after: int | None = None) -> None:
    """Wait until the player at ``root`` shows a finished result (a trace, not a streamed frame or a
    message), received after its ``after``-th value (default: any)."""
    pg.wait_for_function(
        """([root, after]) => { const m = document.querySelector(root + ' .mp-mount');
             return !!m && +(m.dataset.loads || 0) > after && m.dataset.kind === 'mudiff-player'
                    && m.dataset.partial === '0' && !!m.querySelector('.token'); }""",
        arg=[root, -1 if after is None else after], timeout=timeout)


def run_and_wait(pg, button: str, root: str = "#player", timeout: int = 120_000) -> None:
    """Click ``button`` and wait for the result it produces (not the one already on screen)."""
    before = player_loads(pg, root)
    pg.click(button)
    wait_for_result(pg, root, timeout=timeout, after=before)


# The outputs of the app's API endpoints, in order (mudiff_viz/ui/results.py names them).
DECODE_OUTPUTS = ("status", "warning", "player", "fig_order", "fig_conf", "fig_tpf", "downloads")
COMPARE_OUTPUTS = ("status", "warning", "player", "table", "diff_note", "diff_ar", "diff_diffusion", "diff_third",
                   "fig_forward", "fig_wall", "fig_conf", "fig_order", "downloads", "verdict")
VIEW_OUTPUTS = ("status", "warning", "player", "fig_order", "fig_conf", "fig_tpf", "downloads", "table", "fig_wall")


def value(x):
    """An output's value (gr.update(...) outputs arrive as update dicts)."""
    return x.get("value") if isinstance(x, dict) and x.get("__type__") == "update" else x


def payload(x):
    """The player's payload from an API output (the app sends it as JSON text; an update dict wraps it)."""
    x = value(x)
    return json.loads(x) if isinstance(x, str) and x.startswith("{") else x


def named(out, names) -> dict:
    """Outputs by name; the player's payload, which the app sends as JSON text, as an object."""
    assert len(out) == len(names), (len(out), names)
    got = {n: value(x) for n, x in zip(names, out)}
    if isinstance(got.get("player"), str):
        got["player"] = json.loads(got["player"])
    return got


def region_view(pg) -> dict:
    """What the player (#player) shows of a two-stage trace: the chosen region's chip, line and box, the
    clock, the region note, the header and text, and where the chosen line starts in the text box."""
    return pg.evaluate("""() => ({
        pressed: Array.from(document.querySelectorAll('#player .mp-region-chip[aria-pressed=true]')).map(c => c.dataset.region),
        line: Array.from(document.querySelectorAll('#player .mp-line.mp-line-sel')).map(l => l.dataset.region),
        box: Array.from(document.querySelectorAll('#player rect.sel-region')).map(r => r.dataset.region),
        clock: document.querySelector('#player .mp-clock').textContent,
        note: document.querySelector('#player .mp-region-note').textContent,
        header: document.querySelector('#player .mp-header').textContent,
        text: document.querySelector('#player .mp-text').innerText,
        // where the chosen line starts, from the top of the text box (px)
        lineAt: (l => l ? l.getBoundingClientRect().top - document.querySelector('#player .mp-text').getBoundingClientRect().top : null)(
            document.querySelector('#player .mp-line.mp-line-sel')),
    })""")


def open_advanced(pg, prefix: str = "decode") -> None:
    """Open the tab's Advanced settings (its knobs and page perturbations fold away there)."""
    label = pg.locator(f"#{prefix}-advanced .label-wrap").first
    if "open" in (label.get_attribute("class") or "").split():
        return
    label.click()
    pg.wait_for_function("(sel) => document.querySelector(sel).classList.contains('open')",
                         arg=f"#{prefix}-advanced .label-wrap", timeout=10_000)
