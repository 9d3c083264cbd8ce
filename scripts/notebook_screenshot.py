"""docs/screenshots/notebook.png: the player widget in JupyterLab, on examples/decoding-order.ipynb.

Starts JupyterLab on a copy of the notebook (so nothing is saved into examples/), runs every cell
in headless Chromium, scrubs the player to a middle forward, hovers a token and takes the shot.
Needs JupyterLab (``pip install jupyterlab``; not a project requirement) and Debian's Chromium.

    python scripts/notebook_screenshot.py [--out docs/screenshots/notebook.png]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "decoding-order.ipynb"
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float = 120) -> None:
    end = time.time() + seconds
    while time.time() < end:
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2)  # loopback: no proxy
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"JupyterLab did not answer at {url}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "notebook.png"))
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="mudiff-nb-"))
    (work / "lab").mkdir()
    shutil.copy(NOTEBOOK, work / "lab" / NOTEBOOK.name)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", JUPYTER_CONFIG_DIR=str(work / "config"))
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", f"--IdentityProvider.token={token}", "--allow-root",
         f"--ServerApp.root_dir={work / 'lab'}", "--ServerApp.ip=127.0.0.1",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/api/status?token={token}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1050})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            try:  # a fresh JupyterLab asks which kernel to start
                page.click(".jp-Dialog button:has-text('Select')", timeout=20_000)
            except Exception:
                pass
            try:
                page.click(".jp-toast-button:has-text('No')", timeout=3_000)  # the news question
            except Exception:
                pass
            page.click("text=Run", timeout=30_000)  # the Run menu
            page.click("text=Run All Cells")
            pane = ".jp-OutputArea-output .mudiff-widget .mp-pane"
            try:
                page.wait_for_selector(f"{pane} .token", timeout=300_000)
            except Exception:
                page.screenshot(path=str(Path(args.out).with_suffix(".failed.png")))
                raise SystemExit(f"no player appeared; browser errors: {problems[:5]}") from None
            player = page.locator(".mudiff-widget").first
            # scrub the first player to forward 3 and hover a committed token for its card
            player.locator(".mp-scrub").evaluate(
                "el => { el.value = 3; el.dispatchEvent(new Event('input', {bubbles: true})); }")
            page.keyboard.press("Control+b")  # fold the file browser away
            code_cell = page.locator(".jp-CodeCell", has=page.locator(".mudiff-widget")).first
            code_cell.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.evaluate("document.querySelector('.jp-WindowedPanel-outer').scrollBy(0, -70)")  # the cell's input too
            player.locator(".mp-text .token.st-now").nth(2).hover()
            page.wait_for_selector(".mudiff-widget .mp-tip", state="visible", timeout=10_000)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=args.out)
            browser.close()
        print(f"wrote {args.out}")
    finally:
        lab.terminate()
        lab.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
