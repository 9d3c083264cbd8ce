"""Whole-run plotly figures: commit order, confidence histogram, tokens per forward, progress.

Scrubber-tied charts live inside the player (gr.Plot drops plotly animation frames); these figures
summarise the whole run. Only plotly.js 3 features are used (Gradio bundles plotly.js 3.8).
"""

from __future__ import annotations

import plotly.graph_objects as go

from mudiff_viz.core.trace import Trace
from mudiff_viz.views.labels import decoder_colour, decoder_label
from mudiff_viz.views.player import clock_times

MAX_ROWS = 300


def _layout(fig: go.Figure, title: str, height: int = 340) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 15}}, height=height, template="plotly_white",
        margin={"l": 55, "r": 20, "t": 50, "b": 45}, legend={"orientation": "h", "y": -0.22},
        font={"size": 12}, modebar={"orientation": "v"},
    )
    return fig


def untitled(fig: go.Figure | None) -> tuple[go.Figure | None, str]:
    """The figure without its title, and the title: the app shows titles as wrapping labels above the
    plot, so a long title never runs under plotly's toolbar on a narrow screen."""
    if fig is None:
        return None, ""
    title = fig.layout.title.text or ""
    fig.update_layout(title=None, margin={"t": 20})
    return fig, title


def commit_order_matrix(trace: Trace, chunk: int | None = None) -> dict:
    """Rows = (region, block) chunks of the generated text, columns = offset inside the block.

    ``z`` is the denoising step (1-based, counted from the chunk's first forward) at which each
    token was committed: a left-to-right gradient means AR order; a patchy row shows diffusion
    committing easy positions first. AR traces are cut into chunks of 32 tokens.
    """
    L = chunk or trace.block_length or 32
    z, text, labels = [], [], []
    for ri, r in enumerate(trace.regions):
        for start in range(0, len(r.tokens), L):
            toks = r.tokens[start : start + L]
            if not toks:
                continue
            first = min(t.commit_forward for t in toks)
            z.append([t.commit_forward - first + 1 for t in toks] + [None] * (L - len(toks)))
            text.append([
                f"{'EOS' if t.stop else repr(t.text)[1:-1]} · line {ri + 1}, pos {start + j + 1} · forward {t.commit_forward + 1}"
                for j, t in enumerate(toks)
            ] + [""] * (L - len(toks)))
            labels.append(f"line {ri + 1} · {'tokens' if trace.block_length is None else 'block'} {start // L + 1}")
            if len(z) >= MAX_ROWS:
                return {"z": z, "text": text, "rows": labels, "L": L, "truncated": True}
    return {"z": z, "text": text, "rows": labels, "L": L, "truncated": False}


def commit_order_heatmap(trace: Trace) -> go.Figure:
    m = commit_order_matrix(trace)
    fig = go.Figure(go.Heatmap(
        z=m["z"], text=m["text"], hovertemplate="%{text}<br>step in block %{z}<extra></extra>",
        colorscale="Viridis", colorbar={"title": {"text": "step"}}, xgap=1, ygap=1,
        y=list(range(len(m["rows"]))),
    ))
    unit = "32-token chunk" if trace.block_length is None else "block"
    title = f"Commit order ({decoder_label(trace.decoder)}): step at which each position was committed, one row per {unit}"
    if m["truncated"]:
        title += f" (first {MAX_ROWS} rows)"
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=list(range(len(m["rows"])))[:: max(1, len(m["rows"]) // 12)],
                     ticktext=m["rows"][:: max(1, len(m["rows"]) // 12)], title=None)
    fig.update_xaxes(title=f"position in {unit}")
    return _layout(fig, title, height=min(900, 140 + 14 * max(8, len(m["rows"]))))


def confidences(trace: Trace) -> list[float]:
    """Confidence of every kept token (stop tokens included) at its commit."""
    return [t.confidence for r in trace.regions for t in r.tokens]


def confidence_histogram(traces: list[Trace]) -> go.Figure:
    fig = go.Figure()
    for t in traces:
        fig.add_trace(go.Histogram(
            x=confidences(t), xbins={"start": 0, "end": 1.0001, "size": 0.05}, name=decoder_label(t.decoder),
            marker_color=decoder_colour(t.decoder), opacity=0.9,
        ))
    for t in traces:
        th = None if t.is_autoregressive else t.params.get("threshold")
        if th is not None:
            fig.add_vline(x=th, line_dash="dash", line_color="black", annotation_text=f"threshold {th}", annotation_position="top left")
            break
    fig.update_layout(barmode="group" if len(traces) > 1 else "overlay", bargap=0.08)  # side by side: none hides another
    fig.update_xaxes(title="confidence at commit", range=[0, 1])
    fig.update_yaxes(title="tokens")
    return _layout(fig, "Confidence of committed tokens")


def commits_per_forward(trace: Trace) -> list[int]:
    """Tokens of the final text committed at each forward of the shared clock."""
    out = [0] * trace.clock_length
    for r in trace.regions:
        for t in r.tokens:
            if 0 <= t.commit_forward < len(out):
                out[t.commit_forward] += 1
    return out


def tokens_per_forward(traces: list[Trace]) -> go.Figure:
    fig = go.Figure()
    for t in traces:
        y = commits_per_forward(t)
        fig.add_trace(go.Bar(x=list(range(1, len(y) + 1)), y=y, name=decoder_label(t.decoder), marker_color=decoder_colour(t.decoder),
                             opacity=0.9))
    fig.update_layout(barmode="group" if len(traces) > 1 else "overlay", bargap=0.05)
    fig.update_xaxes(title="forward pass (shared clock, batched over lines)")
    fig.update_yaxes(title="tokens committed")
    means = ", ".join(f"{decoder_label(t.decoder)} {t.metrics.tokens_per_forward} tokens/forward (per sequence)" for t in traces)
    return _layout(fig, f"Tokens committed per forward · {means}")


def progress_curves(traces: list[Trace], clock: str = "forward") -> go.Figure:
    """Share of the final text committed against the forward count or wall time (prefill shaded)."""
    fig = go.Figure()
    for i, t in enumerate(traces):
        per = commits_per_forward(t)
        total = max(1, sum(per))
        ys, acc = [0.0], 0
        for v in per:
            acc += v
            ys.append(acc / total)
        if clock == "wall":
            prefill = float(t.metrics.prefill_s)
            xs = [prefill] + clock_times(t)
            y = -0.045 * (i + 1)  # prefill as a thick bar under the curves: separate, so the clocks stay fair
            fig.add_trace(go.Scatter(x=[0, prefill], y=[y, y], mode="lines", name=f"{decoder_label(t.decoder)} prefill ({prefill:.2f} s)",
                                     line={"color": decoder_colour(t.decoder), "width": 7}, opacity=0.55,
                                     hovertemplate=f"{decoder_label(t.decoder)} prefill: vision encoder + prompt, {prefill:.3g} s<extra></extra>"))
        else:
            xs = list(range(len(ys)))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=decoder_label(t.decoder), line={"color": decoder_colour(t.decoder), "width": 2.5}))
    fig.update_yaxes(title="text committed", tickformat=".0%", range=[-0.05 * (len(traces) + 1) if clock == "wall" else 0, 1.02])
    fig.update_xaxes(title="wall time (s)" if clock == "wall" else "forward pass (shared clock)", rangemode="tozero")
    return _layout(fig, "Progress by wall time (prefill as bars below)" if clock == "wall" else "Progress by forward pass")


def is_speculative(trace: Trace) -> bool:
    """A draft-and-verify trace: its step records carry verdicts."""
    return any(s.verdicts is not None for s in trace.steps)


def draft_acceptance(trace: Trace) -> go.Figure:
    """Draft and verify: the share of drafts accepted at each offset from the frontier, and how many
    tokens each (line, verify forward) cycle committed (core/speculation.py)."""
    from plotly.subplots import make_subplots

    from mudiff_viz.core.speculation import acceptance_by_offset, tokens_per_cycle

    rows = acceptance_by_offset(trace)
    cycles = tokens_per_cycle(trace)
    colour = decoder_colour(trace.decoder)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.12,
                        subplot_titles=("accepted, by offset from the frontier", "tokens committed per cycle"))
    fig.add_trace(go.Bar(
        x=[o for o, _, _ in rows], y=[a / v if v else 0 for _, v, a in rows], marker_color=colour, name="acceptance",
        text=[f"{a}/{v}" for _, v, a in rows], textposition="outside", cliponaxis=False,
        hovertemplate="offset %{x}: %{text} drafts accepted (%{y:.0%})<extra></extra>",
    ), row=1, col=1)
    xs = sorted(cycles)
    fig.add_trace(go.Bar(
        x=xs, y=[cycles[x] for x in xs], marker_color="#56b4e9", name="cycles",
        hovertemplate="%{y} cycles committed %{x} tokens<extra></extra>",
    ), row=1, col=2)
    fig.update_yaxes(range=[0, 1.12], tickformat=".0%", title="drafts accepted", row=1, col=1)
    fig.update_xaxes(title="offset (0 = the first position after the verified text)", dtick=1, row=1, col=1)
    fig.update_yaxes(title="cycles (line x verify forward)", row=1, col=2)
    fig.update_xaxes(title="tokens committed", dtick=1, row=1, col=2)
    fig.update_layout(showlegend=False, bargap=0.15)
    n = sum(cycles.values())
    mean = sum(k * v for k, v in cycles.items()) / n if n else 0.0
    m = trace.metrics
    rate = f"{m.accepted}/{m.drafted} drafts accepted" if m.drafted else "no drafts verified"
    return _layout(fig, f"Drafts ({decoder_label(trace.decoder)}): {rate} · {mean:.2f} tokens per cycle", height=360)


def order_or_drafts(trace: Trace) -> go.Figure:
    """The run's shape: draft acceptance for a draft-and-verify trace, else the commit-order heatmap."""
    return draft_acceptance(trace) if is_speculative(trace) else commit_order_heatmap(trace)
