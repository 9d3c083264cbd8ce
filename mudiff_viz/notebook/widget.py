"""The step player in a notebook: an anywidget around the app's own player script.

Jupyter, VS Code, Colab and marimo render anywidget widgets. The widget's ES module is the player
script (assets/player/src joined by views/assets.py) followed by assets/player/widget.js (a few lines that mount it and sync the frame); its payload is
the one the app sends (views/player.py). ``frame`` is synced both ways: the player reports the
forward-clock position it shows, and setting it from a cell moves the player.

Where widgets are not available (a static render, an exported notebook without widget state) the
same output carries ``text/html``: the offline replay (views/export.py) in a sandboxed iframe.
"""

from __future__ import annotations

import html
from typing import Any

from mudiff_viz.core.extras import require
from mudiff_viz.core.trace import Trace
from mudiff_viz.notebook import page_images
from mudiff_viz.views.export import PLAYER_DIR, player_css, player_js, standalone_html_from_payload, trace_title
from mudiff_viz.views.player import compare_payload, player_payload
from mudiff_viz.views.shuffle import grid_payload

anywidget = require("anywidget", "the notebook player")
traitlets = require("traitlets", "the notebook player")


def widget_esm() -> str:
    """The player script (a classic script that defines ``MudiffPlayer``) + the widget's ES module part."""
    return player_js() + "\n" + (PLAYER_DIR / "widget.js").read_text(encoding="utf-8")


def payload_of(obj: Any) -> tuple[dict, str]:
    """The player payload of a Trace, a Comparison or a ShuffleComparison, and a title."""
    if isinstance(obj, Trace):
        return player_payload(obj, image_url=page_images.data_url(obj)), trace_title(obj)
    if hasattr(obj, "ar") and hasattr(obj, "diffusion"):  # api.Comparison
        panes = [player_payload(t, image_url=page_images.data_url(t)) for t in (obj.ar, obj.diffusion)]
        return compare_payload(panes), f"{obj.diffusion.page.source}: AR vs diffusion"
    if hasattr(obj, "traces") and hasattr(obj, "level"):  # api.ShuffleComparison
        images = {col: page_images.data_url(obj.traces[("diffusion", col)]) for col in ("original", "shuffled")}
        return grid_payload(obj.traces, images, obj.level), f"Semantic Shuffle at level {obj.level:g}"
    if isinstance(obj, dict) and obj.get("kind") == "mudiff-player":
        return obj, "mudiff-viz player"
    raise TypeError(f"the player shows a Trace, a Comparison or a ShuffleComparison, not {type(obj).__name__}")


def clock_end(payload: dict) -> int:
    """The last frame: the finished result, where the player opens."""
    panes = payload.get("panes") or [payload]
    return max((p["clock"]["n"] for p in panes), default=0)


class Player(anywidget.AnyWidget):
    """The step player (play, scrub, hover cards, page overlay) of a trace or a comparison."""

    _esm = widget_esm()
    _css = player_css()
    payload = traitlets.Dict().tag(sync=True)
    frame = traitlets.Int(0).tag(sync=True)  # 0 = before the first forward; s = after forward s-1

    def __init__(self, obj: Any, **kwargs: Any) -> None:
        payload, self.title = payload_of(obj)
        kwargs.setdefault("frame", clock_end(payload))
        super().__init__(payload=payload, **kwargs)

    @property
    def n_frames(self) -> int:
        """Frames 0..n_frames - 1 (the clock length plus the start)."""
        return clock_end(self.payload) + 1

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict, dict]:
        shown = super()._repr_mimebundle_(**kwargs)
        data, metadata = shown if isinstance(shown, tuple) else (shown, {})
        return {**data, "text/html": offline_iframe(self.payload, self.title)}, metadata


def offline_iframe(payload: dict, title: str, height: int = 900) -> str:
    """The offline replay in a sandboxed iframe: scripts run inside it, nothing of the notebook's."""
    doc = standalone_html_from_payload(payload, title)
    return (f'<iframe class="mudiff-replay" sandbox="allow-scripts" title="{html.escape(title)}" '
            f'style="width:100%;height:{height}px;border:0" srcdoc="{html.escape(doc, quote=True)}"></iframe>')


def mimebundle(obj: Any) -> tuple[dict, dict]:
    """What a notebook shows for ``obj``: the widget, with the offline replay as the static fallback."""
    return Player(obj)._repr_mimebundle_()


def replay_html(obj: Any) -> str:
    """The standalone offline replay of ``obj`` (a whole HTML file, as ``view --html`` writes)."""
    payload, title = payload_of(obj)
    return standalone_html_from_payload(payload, title)
