"""The player component: a gr.HTML subclass with a static template; all logic runs in the browser.

The value is the whole payload of mudiff_viz.views.player, sent to the browser as one JSON text.
Text, not an object, because Gradio sends each streamed frame of a generator as a diff against the
previous one, computed in Python on the server's event loop: over a nested payload of a long page
(tens of thousands of list entries) that diff took over a second per frame and produced more bytes
than the payload, so the player and the status stalled and the result came long after the decode
ended. Between two texts the diff is one string comparison. The JS (the modules of
assets/player/src joined into one script) and CSS are in assets/player/, shared with the
standalone offline replay.
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
const parsed = (v) => (typeof v === 'string' && v ? JSON.parse(v) : v || null);  // the payload comes as JSON text
const player = MudiffPlayer.mount(mount, parsed(props.value), MP_CSS);
function mark(v) {  // for tests and automation: how many values arrived, and what the last one was
  mount.dataset.loads = String((+mount.dataset.loads || 0) + 1);
  mount.dataset.kind = v && v.kind ? v.kind : 'empty';
  mount.dataset.partial = v && v.partial ? '1' : '0';
}
if (props.value) mark(parsed(props.value));  // a value that arrived before the mount (a hidden tab opened by a link)
watch('value', () => {
  const v = parsed(props.value);
  const kept = player.load(v);
  mark(v);
  // a fresh result below the fold (or scrolled past): bring the player up, keeping the summary line
  // above it; a streamed frame of the same decode (kept = true) never moves the page, its finished
  // result may (the status above it grew meanwhile)
  if ((!kept || !v.partial) && v && v.kind === 'mudiff-player') {
    // measured once the outputs that arrived with it (the status line above) have been laid out
    setTimeout(() => {
      const top = mount.getBoundingClientRect().top;
      if (top > 0.55 * window.innerHeight || top < 0) window.scrollBy({top: top - 90, behavior: 'smooth'});
    }, 200);
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

    def postprocess(self, value: Any) -> str | None:
        """The payload as compact JSON text (see the module's docstring for why not an object)."""
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    def api_info(self) -> dict[str, Any]:
        return {"type": "string", "description": "player payload (mudiff_viz.views.player) as JSON text"}

    def read_from_flag(self, payload: Any) -> Any:
        """Cached examples store the payload as JSON text: give the browser the object back."""
        if isinstance(payload, str) and payload.startswith("{"):
            return json.loads(payload)
        return payload

    def example_payload(self) -> Any:
        return None

    def example_value(self) -> Any:
        return None
