"""A standalone, offline HTML replay of a trace: the player's JS, CSS and the payload inlined.

The file needs no network and no server: open it in a browser and the same player as in the app
plays the trace. Model text travels inside a JSON script block (``<`` escaped as ``\\u003c``) and is
inserted with ``textContent`` by the player, so a page whose text contains ``<script>`` shows it as
text.
"""

from __future__ import annotations

import html
import json

from mudiff_viz.core.trace import Trace
from mudiff_viz.views.assets import PLAYER_DIR, player_js
from mudiff_viz.views.player import compare_payload, player_payload

__all__ = ["PLAYER_DIR", "player_css", "player_js", "standalone_html", "standalone_compare_html"]


def player_css() -> str:
    return (PLAYER_DIR / "player.css").read_text(encoding="utf-8")


def script_json(obj) -> str:
    """JSON safe to place inside a <script> element (no '</script>', no '<!--')."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace(
        "\u2028", "\\u2028").replace("\u2029", "\\u2029")


def standalone_html_from_payload(payload: dict, title: str) -> str:
    js = player_js().replace("</script", "<\\/script")
    css = player_css().replace("</style", "<\\/style")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{html.escape(title)}</title>
<style>
body {{ margin: 0; padding: 16px 20px; background: #fff; color: #1d1f23; font: 14px system-ui, sans-serif; }}
h1 {{ font-size: 18px; margin: 0 0 2px; }}
.sub {{ color: #5f6670; margin: 0 0 12px; font-size: 13px; }}
{css}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="sub">Offline replay made by mudiff-viz. Space: play/pause · ←/→: step · Home/End · hover a token for its alternatives.</p>
<div id="player"></div>
<script type="application/json" id="mudiff-data">{script_json(payload)}</script>
<script>
{js}
MudiffPlayer.mount(document.getElementById("player"), JSON.parse(document.getElementById("mudiff-data").textContent));
</script>
</body>
</html>
"""


def trace_title(trace: Trace) -> str:
    src = trace.page.source or "page"
    return f"{src}: {trace.decoder} decode by {trace.model.name}"


def standalone_html(trace: Trace, image_url: str | None = None) -> str:
    """The offline replay of one trace (``image_url``: the page under it, if known)."""
    return standalone_html_from_payload(player_payload(trace, image_url=image_url), trace_title(trace))


def standalone_compare_html(traces: list[Trace], images: list[str | None], title: str) -> str:
    """The offline replay of several traces on one clock (AR vs diffusion)."""
    panes = [player_payload(t, image_url=img) for t, img in zip(traces, images)]
    return standalone_html_from_payload(compare_payload(panes), title)
