"""Shared by the notebook tests and scripts/notebook_screenshot.py: run examples/decoding-order.ipynb
in a real kernel (nbclient + ipykernel, no network) and render what it displayed as a page.

The page is a plain rendering of the executed notebook: markdown, code with its prompt, text and
HTML outputs; every widget output is mounted from the widget state the kernel saved (the widget's
own ES module, player.js included, and its synced traits) through a minimal model with anywidget's
interface (get, set, on, off, save_changes), as a notebook front end does.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "decoding-order.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def execute_notebook(path: Path = NOTEBOOK, timeout: int = 600):
    """The notebook run top to bottom in a fresh python3 kernel from the repository root; a failing
    cell raises nbclient's CellExecutionError with its traceback."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}},
                            store_widget_state=True)
    with client.setup_kernel(env=env):  # the kernel gets the offline, one-thread environment
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        client.set_widgets_metadata()
    return nb


def widget_states(nb) -> dict[str, dict]:
    """model id -> the synced traits of every widget the kernel created (as saved in the notebook)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return {model_id: m["state"] for model_id, m in state.items()}


def cell_by_tag(nb, tag: str):
    return next(c for c in nb.cells if tag in c.metadata.get("tags", []))


def widget_id(cell) -> str | None:
    for out in cell.get("outputs", []):
        view = out.get("data", {}).get(WIDGET_VIEW)
        if view:
            return view["model_id"]
    return None


_STYLE = """
body { margin: 0; background: #fff; font: 14px system-ui, sans-serif; color: #1d1f23; }
.nb { max-width: 1180px; margin: 0 auto; padding: 16px 24px 60px; }
.cell { display: grid; grid-template-columns: 72px 1fr; gap: 0 8px; margin: 10px 0; }
.prompt { color: #307fc1; font: 12px ui-monospace, monospace; text-align: right; padding-top: 6px; }
.out .prompt { color: #bf5b3d; }
pre.code { margin: 0; padding: 6px 10px; background: #f5f5f5; border: 1px solid #e0e0e0; border-radius: 2px;
  font: 13px/1.4 ui-monospace, monospace; white-space: pre-wrap; }
.md h1 { font-size: 24px; margin: 8px 0; } .md h2 { font-size: 19px; margin: 16px 0 4px; }
.md p { margin: 4px 0; line-height: 1.45; }
.output { overflow-x: auto; } .output pre { margin: 4px 0; font: 12px ui-monospace, monospace; }
table.dataframe { border-collapse: collapse; font-size: 12px; } .dataframe td, .dataframe th { padding: 2px 8px; }
.plot { color: #5f6670; font-style: italic; padding: 4px 0; }
"""

_MOUNT = """
const states = JSON.parse(document.getElementById("widget-states").textContent);
window.widgetModels = {};
window.widgetSaves = [];
function makeModel(id, state) {
  const listeners = {};
  return {
    get: (k) => state[k],
    set: (k, v) => {
      const old = state[k];
      state[k] = v;
      if (old !== v) (listeners["change:" + k] || []).slice().forEach((f) => f());
    },
    on: (e, f) => { (listeners[e] = listeners[e] || []).push(f); },
    off: (e, f) => { listeners[e] = (listeners[e] || []).filter((g) => g !== f); },
    save_changes: () => { window.widgetSaves.push({ id, frame: state.frame }); },
  };
}
for (const el of document.querySelectorAll("[data-widget]")) {
  const id = el.dataset.widget;
  const state = states[id];
  const style = document.createElement("style");
  style.textContent = state._css || "";
  document.head.appendChild(style);
  const url = URL.createObjectURL(new Blob([state._esm], { type: "text/javascript" }));
  const mod = await import(url);
  const model = makeModel(id, state);
  window.widgetModels[id] = model;
  mod.default.render({ model, el });
}
document.body.dataset.mounted = "1";
"""


def _output_html(out, states: dict) -> str:
    data = out.get("data", {})
    if WIDGET_VIEW in data and data[WIDGET_VIEW]["model_id"] in states:
        return f'<div class="widget" data-widget="{html.escape(data[WIDGET_VIEW]["model_id"])}"></div>'
    if "application/vnd.plotly.v1+json" in data:
        title = (data["application/vnd.plotly.v1+json"].get("layout", {}).get("title") or {}).get("text", "")
        return f'<div class="plot">[plotly figure: {html.escape(title)}]</div>'
    if "text/html" in data:
        return data["text/html"]
    text = data.get("text/plain") or out.get("text", "")
    return f"<pre>{html.escape(text)}</pre>"


def notebook_page(nb, tags: set[str] | None = None) -> str:
    """The executed notebook as one HTML page (only the cells with one of ``tags``, when given)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt()
    states = widget_states(nb)
    parts = []
    for cell in nb.cells:
        if tags and not tags & set(cell.metadata.get("tags", [])):
            continue
        if cell.cell_type == "markdown":
            parts.append(f'<div class="cell"><div></div><div class="md">{md.render(cell.source)}</div></div>')
            continue
        n = cell.get("execution_count") or " "
        parts.append(f'<div class="cell"><div class="prompt">In [{n}]:</div>'
                     f'<pre class="code">{html.escape(cell.source)}</pre></div>')
        for out in cell.get("outputs", []):
            prompt = f"Out[{n}]:" if out.get("output_type") == "execute_result" else ""
            parts.append(f'<div class="cell out"><div class="prompt">{prompt}</div>'
                         f'<div class="output">{_output_html(out, states)}</div></div>')
    used = {k: v for k, v in states.items() if v.get("_esm")}
    state_json = json.dumps(used).replace("<", "\\u003c")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>decoding-order.ipynb</title><style>{_STYLE}</style></head>
<body><div class="nb">{''.join(parts)}</div>
<script type="application/json" id="widget-states">{state_json}</script>
<script type="module">{_MOUNT}</script>
</body></html>
"""
