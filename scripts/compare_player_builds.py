"""Does a player change leave the drawing of plain traces alone? Compare two builds frame by frame.

    python scripts/compare_player_builds.py [--old-rev 04fca40]

Decodes the bundled sample (nano-char diffusion and AR, nano-subword diffusion, 48 tokens a line,
and the AR/diffusion comparison), mounts each payload in headless Chromium under the player script of
``--old-rev`` (its assets/player/player.js, or its assets/player/src joined) and under the working
tree's, seeks every frame and compares the DOM of the panes, the legend, the charts and the options,
then a pinned card and the commit colour mode. Prints, per payload, how many snapshots are identical
and the first difference. A refactor of the player should print all identical.
"""

from __future__ import annotations

import argparse
import difflib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAP = """() => { const r = document.getElementById('player');
  return [...r.querySelectorAll('.mp-pane')].map(p => p.outerHTML).join('') + r.querySelector('.mp-legend').outerHTML +
    r.querySelector('.mp-charts').outerHTML + r.querySelector('.mp-controls-2').outerHTML; }"""


def script_at(rev: str) -> str:
    """The player script of a git revision: its single player.js, else its modules joined."""
    from mudiff_viz.views.assets import join_modules

    one = subprocess.run(["git", "show", f"{rev}:assets/player/player.js"], cwd=ROOT, capture_output=True, text=True)
    if one.returncode == 0:
        return one.stdout
    tar = subprocess.run(["git", "archive", rev, "assets/player/src"], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as d:
        tarfile.open(fileobj=io.BytesIO(tar)).extractall(d, filter="data")
        return join_modules(Path(d) / "assets" / "player" / "src")


def page_html(js: str, payload: dict) -> str:
    from mudiff_viz.views.export import player_css, script_json

    js = js.replace("</script", "<\\/script")
    return (f'<!doctype html><html><head><style>{player_css()}</style></head><body><div id="player"></div>'
            f'<script type="application/json" id="d">{script_json(payload)}</script><script>{js}\n'
            'MudiffPlayer.mount(document.getElementById("player"), JSON.parse(document.getElementById("d").textContent));'
            "</script></body></html>")


def snapshots(browser, html: Path) -> list[str]:
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(html.as_uri())
    pg.wait_for_selector("#player .token")
    n = pg.evaluate("() => document.getElementById('player').__mudiffPlayer.maxFrame()")
    out = []
    for f in range(n + 1):
        pg.evaluate(f"() => document.getElementById('player').__mudiffPlayer.seekFrame({f})")
        out.append(pg.evaluate(SNAP))
    pg.click("#player .mp-text .token >> nth=3")
    out.append(pg.inner_html("#player .mp-inspect"))
    pg.select_option("#player .mp-colour", "commit")
    out.append(pg.evaluate(SNAP))
    pg.close()
    if errors:
        raise SystemExit(f"error: JavaScript errors in {html.name}: {errors}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-rev", default="04fca40", help="git revision of the build to compare with")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page
    from mudiff_viz.views.assets import player_js
    from mudiff_viz.views.page_image import image_data_url
    from mudiff_viz.views.player import compare_payload, player_payload

    page = load_page(str(ROOT / "assets" / "samples" / "courier-short.pdf"))
    image = image_data_url(page.image)
    traces = {
        "nano-char diffusion": decode_page(page, "nano-char", "diffusion", make_params(threshold=0.999, max_new_tokens=48)),
        "nano-char AR": decode_page(page, "nano-char", "ar", make_params(max_new_tokens=48)),
        "nano-subword diffusion": decode_page(page, "nano-subword", "diffusion", make_params(max_new_tokens=48)),
    }
    payloads = {k: player_payload(t, image_url=image) for k, t in traces.items()}
    payloads["AR vs diffusion"] = compare_payload([payloads["nano-char AR"], payloads["nano-char diffusion"]])
    builds = {"old": script_at(args.old_rev), "new": player_js()}
    different = 0
    with sync_playwright() as p, tempfile.TemporaryDirectory() as d:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        for name, payload in payloads.items():
            snaps = {}
            for build, js in builds.items():
                html = Path(d) / f"{build}.html"
                html.write_text(page_html(js, payload), encoding="utf-8")
                snaps[build] = snapshots(browser, html)
            same = sum(a == b for a, b in zip(snaps["old"], snaps["new"]))
            print(f"{name}: {same}/{len(snaps['old'])} snapshots identical")
            for i, (a, b) in enumerate(zip(snaps["old"], snaps["new"])):
                if a != b:
                    diff = list(difflib.unified_diff(a.split("><"), b.split("><"), lineterm="", n=0))[2:8]
                    print(f"  first difference at snapshot {i}: {diff}")
                    different += 1
                    break
        browser.close()
    return 1 if different else 0


if __name__ == "__main__":
    raise SystemExit(main())
