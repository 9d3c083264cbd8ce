"""Regenerate docs/screenshots/*.png from the real app on the embedded nano weights.

    python scripts/take_screenshots.py [--out docs/screenshots] [--only decode,compare]

Starts the app (``python app.py``) on a free port, drives each tab in headless Chromium
(Debian's /usr/bin/chromium through Playwright) and writes one PNG per view. Rerun it whenever
the weights, the example traces or the UI change, and look at the results before committing.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1440, "height": 1000}
PHONE = {"width": 390, "height": 844}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(port: int) -> subprocess.Popen:
    env = {**os.environ, "MUDIFF_HOST": "127.0.0.1", "MUDIFF_PORT": str(port), "HF_HUB_OFFLINE": "1",
           "GRADIO_ANALYTICS_ENABLED": "False"}
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/gradio_api/info", timeout=5).read()
            return proc
        except Exception:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise SystemExit("error: the app did not start")
            time.sleep(0.5)


def scrub(pg, root: str, fraction: float) -> None:
    pg.eval_on_selector(f"{root} .mp-scrub", "(el, f) => { el.value = Math.round(el.max * f); "
                        "el.dispatchEvent(new Event('input', {bubbles: true})); }", fraction)


def show(pg, selector: str) -> None:
    """Scroll so that ``selector`` sits at the top of the viewport (the player is the subject)."""
    pg.eval_on_selector(selector, "el => el.scrollIntoView({block: 'start'})")
    pg.wait_for_timeout(300)


def open_tab(pg, name: str) -> None:
    pg.get_by_role("tab", name=name).click()
    pg.wait_for_timeout(500)


def shot_player(pg, out: Path, name: str, button: str, root: str, fraction: float, top: str,
                tab: str | None = None, result: str = ".token") -> None:
    """Run a tab's decode, scrub its player to ``fraction`` of the clock, shoot with ``top`` at the top.
    ``result``: what the finished result holds (the Shuffle tab plays finished panes before its grid)."""
    if tab:
        open_tab(pg, tab)
    before = pg.evaluate("root => { const m = document.querySelector(root + ' .mp-mount'); return m ? +(m.dataset.loads || 0) : 0; }", root)
    pg.click(button)
    pg.wait_for_function(  # the finished result it made, not a streamed frame or what was on screen before
        """([root, before, result]) => { const m = document.querySelector(root + ' .mp-mount');
             return !!m && +(m.dataset.loads || 0) > before && m.dataset.kind === 'mudiff-player' && m.dataset.partial === '0'
                    && !!m.querySelector(result); }""", arg=[root, before, result], timeout=600_000)
    pg.wait_for_timeout(800)
    scrub(pg, root, fraction)
    show(pg, top)
    pg.mouse.move(2, 2)  # off the tokens: a stray hover card would cover the player
    pg.wait_for_timeout(200)
    pg.screenshot(path=str(out / name), full_page=False)


def shot_decode(pg, out: Path) -> None:
    shot_player(pg, out, "decode.png", "#decode-run", "#player", 0.42, "#decode-status")
    show(pg, "#player")
    token = pg.locator("#player .mp-toks .token.st-ghost, #player .mp-toks .token.st-now").nth(3)
    token.hover()  # the mouse stays put: no element screenshot (it would scroll and lose the hover)
    pg.wait_for_timeout(400)
    pg.screenshot(path=str(out / "decode-hover.png"), full_page=False)


def shot_compare(pg, out: Path) -> None:
    shot_player(pg, out, "compare.png", "#compare-run", "#compare-player", 0.3, "#compare-player",
                tab="Compare AR vs diffusion")


def shot_shuffle(pg, out: Path) -> None:
    shot_player(pg, out, "shuffle.png", "#shuffle-run", "#shuffle-player", 0.5, "#shuffle-status",
                tab="Semantic Shuffle", result=".mp-panes.mp-grid .token")


def shot_viewer(pg, out: Path) -> None:
    shot_player(pg, out, "viewer.png", "#trace-example-diffusion", "#viewer-player", 0.6, "#viewer-player",
                tab="Trace viewer")


def open_lessons(pg) -> None:
    """The How-it-works tab, once its first view has opened lesson 1 on its recording."""
    open_tab(pg, "How it works")
    pg.wait_for_selector("#lesson-player .token", timeout=120_000)


def shot_how(pg, out: Path) -> None:
    open_lessons(pg)  # the lesson picker and lesson 1, opened on its recording
    pg.evaluate("window.scrollTo(0, 0)")
    pg.wait_for_timeout(300)
    pg.screenshot(path=str(out / "how-it-works.png"), full_page=False)


def shot_lesson(pg, out: Path) -> None:
    """Lesson 7 (both embedded pairs on one clock) and lesson 8 (AR, speculative, self-speculative),
    each on its recording, scrubbed to a fraction of the clock."""
    open_lessons(pg)
    shot_player(pg, out, "lesson-pairs.png", "#lesson-pairs", "#lesson-player", 0.1, "#lesson-status")
    shot_player(pg, out, "lesson-drafts.png", "#lesson-drafts", "#lesson-player", 0.3, "#lesson-status")


def shot_corpus(pg, out: Path) -> None:
    """The Corpus tab on its first view: the example store (assets/corpus) opens by itself."""
    open_tab(pg, "Corpus")
    pg.wait_for_function("() => /decoded pages/.test(document.querySelector('#corpus-status').innerText)",
                         timeout=120_000)
    pg.wait_for_selector("#corpus-fig-cer-by-level .scatterlayer .point", timeout=60_000)
    pg.wait_for_timeout(800)
    show(pg, "#corpus-status")
    pg.mouse.move(2, 2)
    pg.screenshot(path=str(out / "corpus.png"), full_page=False)


def shot_phone(browser, url: str, out: Path) -> None:
    """390 x 844: the first screen (Run on it), then the player mid-decode with its sticky controls."""
    ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    pg = ctx.new_page()
    pg.goto(url)
    pg.wait_for_selector(".gradio-container")
    pg.wait_for_timeout(1500)
    pg.screenshot(path=str(out / "phone-start.png"), full_page=False)
    pg.click("#decode-run")
    pg.wait_for_function(
        """() => { const m = document.querySelector('#player .mp-mount');
             return !!m && m.dataset.kind === 'mudiff-player' && m.dataset.partial === '0' && !!m.querySelector('.token'); }""",
        timeout=600_000)
    pg.wait_for_timeout(800)
    scrub(pg, "#player", 0.5)
    pg.eval_on_selector("#player .mp-text", "el => el.scrollIntoView({block: 'center'})")
    pg.wait_for_timeout(400)
    pg.screenshot(path=str(out / "phone-player.png"), full_page=False)
    ctx.close()


def shot_offline(browser, out: Path) -> None:
    from mudiff_viz.core.trace import Trace
    from mudiff_viz.probes.replay import page_for_trace
    from mudiff_viz.views.export import standalone_html
    from mudiff_viz.views.page_image import image_data_url

    trace = Trace.load(ROOT / "assets" / "traces" / "courier-short.diffusion.json")
    html = out.parent / ".offline-replay.html"
    html.write_text(standalone_html(trace, image_data_url(page_for_trace(trace.page))), encoding="utf-8")
    try:
        ctx = browser.new_context(viewport=VIEWPORT)
        pg = ctx.new_page()
        pg.goto(html.as_uri())
        pg.wait_for_selector(".token", timeout=30_000)
        scrub(pg, "", 0.5)
        pg.wait_for_timeout(300)
        pg.screenshot(path=str(out / "offline-replay.png"), full_page=False)
        ctx.close()
    finally:
        html.unlink(missing_ok=True)


def shot_drafts(browser, out: Path) -> None:
    """A self-speculative decode of the sample by the subword pair in the offline replay, at the
    frame of a forward that rejected a draft, its card pinned: desktop and phone."""
    from mudiff_viz.core.trace import REJECTED
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.export import standalone_html_from_payload, trace_title
    from mudiff_viz.views.page_image import image_data_url
    from mudiff_viz.views.player import player_payload

    page = load_page(str(ROOT / "assets" / "samples" / "courier-short.pdf"))
    trace = decode_page(page, "nano-subword", "self-speculative", make_params())
    payload = player_payload(trace, image_url=image_data_url(page.image))
    slot = {(r, q): i for i, (r, q) in enumerate(zip(payload["slots"]["region"], payload["slots"]["pos"]))}
    frame, pin = trace.clock_length, None
    for s in sorted(trace.steps, key=lambda s: s.forward):
        if s.forward >= 6 and s.verdicts and REJECTED in s.verdicts:
            frame, pin = s.forward + 1, slot[(s.region, s.positions[s.verdicts.index(REJECTED)])]
            break
    html = out.parent / ".drafts-replay.html"
    html.write_text(standalone_html_from_payload(payload, trace_title(trace)), encoding="utf-8")
    try:
        for name, vp, phone in (("drafts.png", VIEWPORT, False), ("phone-drafts.png", PHONE, True)):
            ctx = browser.new_context(viewport=vp, has_touch=phone, is_mobile=phone)
            pg = ctx.new_page()
            pg.goto(html.as_uri())
            pg.wait_for_selector("#player .mp-text .token", timeout=30_000)
            pg.eval_on_selector("#player .mp-scrub", "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }", frame)
            if pin is not None:
                pg.eval_on_selector(f"#player .mp-text [data-i='{pin}']", "e => e.click()")
            if phone:  # the pane's title and header just under the sticky play bar
                show(pg, "#player .mp-pane")
                pg.evaluate("window.scrollBy(0, -document.querySelector('#player > .mp-controls').offsetHeight - 8)")
            pg.wait_for_timeout(300)
            pg.screenshot(path=str(out / name), full_page=False)
            ctx.close()
    finally:
        html.unlink(missing_ok=True)


SHOTS = {"decode": shot_decode, "compare": shot_compare, "shuffle": shot_shuffle, "viewer": shot_viewer,
         "how": shot_how, "lesson": shot_lesson, "corpus": shot_corpus}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--only", default=",".join([*SHOTS, "phone", "offline", "drafts"]))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = args.only.split(",")
    port = free_port()
    proc = start_app(port) if any(n in wanted for n in [*SHOTS, "phone"]) else None  # the replays need no app
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            for name in [n for n in SHOTS if n in wanted]:
                ctx = browser.new_context(viewport=VIEWPORT)
                pg = ctx.new_page()
                pg.goto(f"http://127.0.0.1:{port}/")
                pg.wait_for_selector(".gradio-container")
                pg.wait_for_timeout(1000)
                SHOTS[name](pg, out)
                ctx.close()
                print(f"{name}: done", flush=True)
            if "phone" in wanted:
                shot_phone(browser, f"http://127.0.0.1:{port}/", out)
                print("phone: done", flush=True)
            if "offline" in wanted:
                shot_offline(browser, out)
                print("offline: done", flush=True)
            if "drafts" in wanted:
                shot_drafts(browser, out)
                print("drafts: done", flush=True)
            browser.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
