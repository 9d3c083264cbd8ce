"""Plotly figures of a corpus's aggregates (corpus/stats.py computes the tables they draw).

Points that stand for one page carry ``customdata = [run_id, page_id, decoder]``: the app opens
that page's trace in the player when one is clicked.
"""

from __future__ import annotations

import plotly.graph_objects as go

from mudiff_viz.views.labels import cer_percent, decoder_colour, decoder_label

PAGE_KEY = ("run_id", "page_id", "decoder")
JITTER = {"diffusion": -0.012, "ar": 0.012}  # shuffle-level offsets so the decoders' points do not overlap


def _layout(fig: go.Figure, title: str, x: str, y: str, **extra) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, template="plotly_white", height=420,
                      legend={"orientation": "h", "y": -0.2}, **extra)
    return fig


def _decoders(rows: list[dict]) -> list[str]:
    return sorted({r["decoder"] for r in rows}, key=lambda d: (d != "diffusion", d))


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _page_hover(r: dict) -> str:
    return f"{r['source']} p{r['page_index'] + 1} seed {r['seed']}<br>CER {cer_percent(r['cer'])}"


def cer_by_level(cer_rows: list[dict], points: list[dict]) -> go.Figure:
    """CER against shuffle level (no occlusion, no degradation): each page as a point, the mean over
    pages with its 95% t-interval as a line."""
    low = min((r["occlusion"] for r in cer_rows), default=0.0)
    base = [r for r in cer_rows if r["occlusion"] == low and r["degrade"] == "none"]
    pts = [p for p in points if p["occlusion"] == low and p["degrade"] == "none" and p["cer"] is not None]
    fig = go.Figure()
    for d in _decoders(base + pts):
        colour = decoder_colour(d)
        mine = [p for p in pts if p["decoder"] == d]
        fig.add_trace(go.Scatter(
            x=[p["level"] + JITTER.get(d, 0.0) for p in mine], y=[p["cer"] for p in mine], mode="markers",
            name=f"{decoder_label(d)} pages", marker={"color": colour, "opacity": 0.35, "size": 6},
            customdata=[[p[k] for k in PAGE_KEY] for p in mine], hovertext=[_page_hover(p) for p in mine],
            hoverinfo="text",
        ))
        rows = [r for r in base if r["decoder"] == d]
        fig.add_trace(go.Scatter(
            x=[r["level"] for r in rows], y=[r["mean_cer"] for r in rows], mode="lines+markers",
            name=f"{decoder_label(d)} mean (95% CI)", line={"color": colour},
            error_y={"type": "data", "symmetric": False,
                     "array": [_or(r["ci_high"], r["mean_cer"]) - r["mean_cer"] for r in rows],
                     "arrayminus": [r["mean_cer"] - _or(r["ci_low"], r["mean_cer"]) for r in rows]},
        ))
    return _layout(fig, "CER by shuffle level (mean over pages, 95% t-interval)", "shuffle level", "CER",
                   yaxis={"tickformat": ".1%", "rangemode": "tozero"})


def tokens_per_forward(points: list[dict]) -> go.Figure:
    """Tokens per forward against tokens, one point per page."""
    fig = go.Figure()
    for d in _decoders(points):
        mine = [p for p in points if p["decoder"] == d]
        fig.add_trace(go.Scatter(
            x=[p["tokens"] for p in mine], y=[p["tokens_per_forward"] for p in mine], mode="markers",
            name=decoder_label(d), marker={"color": decoder_colour(d), "opacity": 0.6, "size": 7},
            customdata=[[p[k] for k in PAGE_KEY] for p in mine], hovertext=[_page_hover(p) for p in mine],
            hoverinfo="text",
        ))
    return _layout(fig, "Tokens per forward, per page", "tokens on the page", "tokens per forward",
                   yaxis={"rangemode": "tozero"})


def step_by_position(rows: list[dict]) -> go.Figure:
    fig = go.Figure()
    for d in _decoders(rows):
        mine = [r for r in rows if r["decoder"] == d]
        fig.add_trace(go.Scatter(x=[r["pos_in_block"] for r in mine], y=[r["mean_step"] for r in mine],
                                 mode="lines+markers", name=decoder_label(d), line={"color": decoder_colour(d)},
                                 text=[f"{r['tokens']} tokens" for r in mine]))
    return _layout(fig, "Commit step against position in block", "position in block",
                   "mean denoising step that committed it (1 = first)")


def _bars(rows: list[dict], category: str, value: str, title: str, x: str, y: str) -> go.Figure:
    fig = go.Figure()
    for d in _decoders(rows):
        mine = [r for r in rows if r["decoder"] == d]
        fig.add_trace(go.Bar(x=[r[category] for r in mine], y=[r[value] for r in mine], name=decoder_label(d),
                             marker_color=decoder_colour(d), text=[f"{r['tokens']} tokens" for r in mine]))
    return _layout(fig, title, x, y, barmode="group")


def calibration(bins: list[dict], ece: list[dict]) -> go.Figure:
    """Reliability diagram: accuracy against mean confidence per bin (marker area ~ tokens)."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                             line={"color": "#999999", "dash": "dot"}))
    errors = {e["decoder"]: e["ece"] for e in ece}
    biggest = max((b["tokens"] for b in bins), default=1)
    for d in _decoders(bins):
        mine = [b for b in bins if b["decoder"] == d]
        fig.add_trace(go.Scatter(
            x=[b["mean_confidence"] for b in mine], y=[b["accuracy"] for b in mine], mode="lines+markers",
            name=f"{decoder_label(d)} (ECE {errors[d]:.3f})", line={"color": decoder_colour(d)},
            marker={"size": [6 + 18 * (b["tokens"] / biggest) ** 0.5 for b in mine]},
            text=[f"[{b['low']:.1f}, {b['high']:.1f}): {b['tokens']} tokens" for b in mine],
        ))
    return _layout(fig, "Confidence calibration (reliability diagram)", "mean confidence in bin",
                   "share of tokens right", xaxis={"range": [0, 1]}, yaxis={"range": [0, 1.02]})


def build_figures(tables: dict, points: list[dict]) -> dict[str, go.Figure]:
    return {
        "cer_by_level": cer_by_level(tables["cer_by_condition"], points),
        "tokens_per_forward": tokens_per_forward(points),
        "step_by_position": step_by_position(tables["step_by_position"]),
        "lateness_by_class": _bars(tables["lateness_by_class"], "char_class", "mean_lateness",
                                   "Lateness by character class", "character class",
                                   "mean lateness (0 = block's first step, 1 = its last)"),
        "lateness_by_distance": _bars(tables["lateness_by_distance"], "distance", "mean_lateness",
                                      "Lateness by distance to an occluded word",
                                      "tokens to the nearest occluded token",
                                      "mean lateness (0 = block's first step, 1 = its last)"),
        "calibration": calibration(tables["calibration_bins"], tables["calibration_error"]),
    }
