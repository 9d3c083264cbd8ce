"""examples/decoding-order.ipynb runs top to bottom in a real kernel (nbclient + ipykernel, offline),
and the players it displayed play in headless Chromium from the widget state the kernel saved: the
widget's own ES module (player.js inside) mounted as a notebook front end mounts it
(tests/notebook_support.py). The static fallback (the offline replay in an iframe) plays too."""

from __future__ import annotations

import base64
import html
import json
import re

import nbformat
import numpy as np
import pytest

from tests.notebook_support import NOTEBOOK, cell_by_tag, execute_notebook, notebook_page, widget_id, widget_states

# the browser tests take the `browser` fixture (conftest.py), which skips them, with the reason, without Chromium


@pytest.fixture(scope="module")
def executed():
    return execute_notebook()


def text_of(cell) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs)


def test_the_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_the_notebook_runs_and_computes_what_it_says(executed):
    decode = text_of(cell_by_tag(executed, "decode"))
    per_forward = float(re.match(r"([\d.]+) tokens per forward; 1.0 for AR", decode).group(1))
    assert per_forward > 1
    assert "commit_forward" in text_of(cell_by_tag(executed, "tokens"))
    plot = cell_by_tag(executed, "order-plot").outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert plot["data"] and plot["layout"]["title"]["text"].startswith("Commit forward against position")
    assert "tokens per forward" in text_of(cell_by_tag(executed, "compare"))
    assert "cer" in text_of(cell_by_tag(executed, "shuffle"))
    assert text_of(cell_by_tag(executed, "store-page")).strip() == "True"  # a stored page's frame = its table rows


def test_the_corpus_figure_matches_corpus_stats(executed):
    """The notebook's DuckDB query draws the same numbers as `corpus stats` (docs/corpus.md)."""
    from mudiff_viz.corpus.stats import connect, step_by_position
    from mudiff_viz.notebook.store import SHIPPED_STORE

    figure = cell_by_tag(executed, "corpus").outputs[0]["data"]["application/vnd.plotly.v1+json"]
    drawn = {trace["name"]: plotted(trace["y"]) for trace in figure["data"]}
    expected = {}
    for row in step_by_position(connect(SHIPPED_STORE)):
        expected.setdefault(row["decoder"], []).append(row["mean_step"])
    assert set(drawn) == set(expected) == {"diffusion"}  # AR tokens have no step in a block
    assert drawn["diffusion"] == pytest.approx(expected["diffusion"])
    assert len(expected["diffusion"]) == 32  # one point per position of a 32-long block


def plotted(values) -> list[float]:
    """A plotly figure's array: a list, or the typed buffer plotly 6 sends numpy arrays as."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


@pytest.fixture(scope="module")
def opened(executed, browser, tmp_path_factory):
    """The executed notebook as a page, its widgets mounted; JavaScript errors fail the tests."""
    path = tmp_path_factory.mktemp("nb") / "notebook.html"
    path.write_text(notebook_page(executed), encoding="utf-8")
    ctx = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-mounted='1']", timeout=60_000)
    yield page
    ctx.close()
    assert errors == []


def widget(executed, tag: str) -> str:
    return f'[data-widget="{widget_id(cell_by_tag(executed, tag))}"]'


def states(page, root: str) -> list[str]:
    return page.eval_on_selector_all(f"{root} .mp-pane .token", "els => els.map(e => e.className)")


def test_every_displayed_player_plays(executed, opened):
    for tag, panes in (("trace", 1), ("player", 1), ("compare-player", 2), ("shuffle-player", 4)):
        root = widget(executed, tag)
        assert opened.locator(f"{root} .mp-pane").count() == panes, tag
        assert opened.locator(f"{root} .token").count() > 100, tag
        images = opened.eval_on_selector_all(f"{root} img.mp-page-img", "els => els.map(e => e.naturalWidth)")
        assert len(images) == panes and all(w > 0 for w in images), tag  # the page under every pane


def test_the_widget_opens_at_its_frame_scrubs_and_reports_back(executed, opened):
    root = widget(executed, "player")
    model_id = widget_id(cell_by_tag(executed, "player"))
    state = widget_states(executed)[model_id]
    assert state["frame"] == 2  # the cell `player.frame = 2` ran after the player was shown
    assert "step 2/" in opened.inner_text(f"{root} .mp-header")
    assert opened.eval_on_selector(f"{root} .mp-scrub", "el => el.value") == "2"
    # scrub to the start: nothing committed, and the model hears where the player is
    opened.eval_on_selector(f"{root} .mp-scrub", "el => { el.value = 0; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    assert not any("st-done" in c or "st-now" in c for c in states(opened, root))
    assert opened.evaluate(f"window.widgetModels['{model_id}'].get('frame')") == 0
    assert opened.evaluate("window.widgetSaves.at(-1)") == {"id": model_id, "frame": 0}
    # a cell sets the trait: the player moves to the end, every token committed
    end = state["payload"]["clock"]["n"]
    opened.evaluate(f"window.widgetModels['{model_id}'].set('frame', {end})")
    assert all("st-done" in c or "st-now" in c for c in states(opened, root))
    assert opened.eval_on_selector(f"{root} .mp-scrub", "el => el.value") == str(end)
    # an out-of-range frame is clamped, and the model is told the frame the player shows
    opened.evaluate(f"window.widgetModels['{model_id}'].set('frame', 10000)")
    assert opened.evaluate(f"window.widgetModels['{model_id}'].get('frame')") == end


def test_hovering_a_token_shows_its_card(executed, opened):
    root = widget(executed, "trace")
    opened.eval_on_selector(f"{root} .mp-scrub", "el => { el.value = 2; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    token = opened.locator(f"{root} .token.st-done, {root} .token.st-now, {root} .token.st-ghost").first
    token.scroll_into_view_if_needed()
    token.hover()
    tip = opened.locator(f"{root} .mp-tip")
    tip.wait_for(state="visible")
    assert "Top-5" in tip.inner_text() and tip.locator(".mp-topk li").count() >= 1


def test_the_static_fallback_is_the_offline_replay(executed, browser, tmp_path):
    """Where widgets do not render, the output's text/html plays the same trace in an iframe."""
    out = next(o for o in cell_by_tag(executed, "trace").outputs if "text/html" in o.get("data", {}))
    fallback = out["data"]["text/html"]
    doc = html.unescape(re.search(r'srcdoc="([^"]*)"', fallback).group(1))
    path = tmp_path / "fallback.html"
    path.write_text(f"<!doctype html><body>{fallback}</body>", encoding="utf-8")
    ctx = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = ctx.new_page()
    page.goto(path.as_uri())
    frame = page.frame_locator("iframe.mudiff-replay")
    frame.locator("#player .token").first.wait_for()
    payload = json.loads(re.search(r'<script type="application/json" id="mudiff-data">(.*?)</script>', doc, re.S).group(1))
    assert frame.locator("#player .mp-pane .token").count() == len(payload["slots"]["region"]) - sum(payload["slots"]["filler"])
    ctx.close()
