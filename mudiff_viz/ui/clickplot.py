"""A plotly figure whose points can be clicked: gr.Plot sends no click events, so this gr.HTML
subclass draws the figure itself (plotly.js from the plotly package, served by the app) and
triggers a ``click`` event carrying the clicked point's ``customdata``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gradio as gr
import plotly

PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def plotly_url() -> str:
    return f"gradio_api/file={PLOTLY_JS}"  # relative: works under a path prefix too


def js_on_load() -> str:
    return """
const box = element.querySelector('.cp-mount');
const url = %s;
function withPlotly(fn) {
  if (window.Plotly && window.Plotly.react) return fn();
  let s = document.getElementById('mudiff-plotly-js');
  if (!s) {
    s = document.createElement('script');
    s.id = 'mudiff-plotly-js';
    s.src = url;
    document.head.appendChild(s);
  }
  s.addEventListener('load', fn, {once: true});
}
function draw() {
  const v = props.value;
  if (!v) { if (window.Plotly && box.data) window.Plotly.purge(box); box.textContent = ''; return; }
  const fig = typeof v === 'string' ? JSON.parse(v) : v;
  withPlotly(() => {
    const layout = Object.assign({}, fig.layout || {}, {autosize: true});
    window.Plotly.react(box, fig.data || [], layout, {responsive: true, displaylogo: false}).then(() => {
      if (box.__mudiffClick) return;
      box.__mudiffClick = true;
      box.on('plotly_click', (ev) => {
        const p = ev && ev.points && ev.points[0];
        if (p && p.customdata) trigger('click', {key: p.customdata});
      });
    });
  });
}
draw();
watch('value', draw);
""" % json.dumps(plotly_url())


class ClickPlot(gr.HTML):
    """A figure (``fig.to_json()``) whose page points open something when clicked."""

    def __init__(self, value: Any = None, **kwargs: Any) -> None:
        super().__init__(value=value, html_template='<div class="cp-mount" style="width:100%;min-height:60px"></div>',
                         css_template="", js_on_load=js_on_load(), apply_default_css=False, container=False, padding=False,
                         **kwargs)

    def api_info(self) -> dict[str, Any]:
        return {"type": "string", "description": "a plotly figure as JSON"}
