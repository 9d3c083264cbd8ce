"""The player component: a gr.HTML subclass with a static template; all logic runs in the browser.

The value is the whole payload of mudiff_viz.views.player (sent once per decode). The JS (the
modules of assets/player/src joined into one script) and CSS are in assets/player/, shared with the standalone offline replay.
"""

from __future__ import annotations

import json
from typing import Any

import gradio as gr

from mudiff_viz.views.export import player_css, player_js

TEMPLATE = '<div class="mp-mount"></div>'


def js_on_load() -> str:
    return (
        f"const MP_CSS = {json.dumps(player_css())};\n"
        + player_js()
        + """
const mount = element.querySelector('.mp-mount');
const player = MudiffPlayer.mount(mount, props.value, MP_CSS);
function mark(v) {  // for tests and automation: how many values arrived, and what the last one was
  mount.dataset.loads = String((+mount.dataset.loads || 0) + 1);
  mount.dataset.kind = v && v.kind ? v.kind : 'empty';
  mount.dataset.partial = v && v.partial ? '1' : '0';
}
watch('value', () => {
  const kept = player.load(props.value);
  mark(props.value);
  // a fresh result below the fold (or scrolled past): bring the player up, keeping the summary line
  // above it; a streamed frame of the same decode (kept = true) never moves the page
  const v = props.value;
  if (!kept && v && v.kind === 'mudiff-player') {
    const top = mount.getBoundingClientRect().top;
    if (top > 0.55 * window.innerHeight || top < 0) window.scrollBy({top: top - 90, behavior: 'smooth'});
  }
});
"""
    )


class Player(gr.HTML):
    """Plays a decode trace (or two on one clock) in the browser: scrubber, page overlay, charts."""

    def __init__(self, value: Any = None, **kwargs: Any) -> None:
        super().__init__(
            value=value,
            html_template=TEMPLATE,
            css_template="",
            js_on_load=js_on_load(),
            apply_default_css=False,
            container=False,
            padding=False,
            **kwargs,
        )

    def api_info(self) -> dict[str, Any]:
        return {"type": "object", "description": "player payload (mudiff_viz.views.player)"}

    def read_from_flag(self, payload: Any) -> Any:
        """Cached examples store the payload as JSON text: give the browser the object back."""
        if isinstance(payload, str) and payload.startswith("{"):
            return json.loads(payload)
        return payload

    def example_payload(self) -> Any:
        return None

    def example_value(self) -> Any:
        return None
