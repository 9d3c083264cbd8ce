"""Tables and text comparisons: metrics side by side, and decoded text diffed against ground truth."""

from __future__ import annotations

from mudiff_viz.core.align import diff_ops
from mudiff_viz.core.counts import trace_counts
from mudiff_viz.core.metrics import order_correlation
from mudiff_viz.core.trace import Trace
from mudiff_viz.views.labels import counted, decoder_label
from mudiff_viz.views.markdown import md_text

DIFF_COLOURS = {"substituted": "#e69f00", "expected": "#009e73", "extra": "#cc79a7", "missing": "#56b4e9"}


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}{unit}" if abs(v) < 100 else f"{v:.1f}{unit}"
    return f"{v}{unit}"


ORDER_LABEL = "decoding order vs reading order *"
ORDER_NOTE = ("\\* Spearman rank correlation, inside each block, between a token's position and the step it was "
              "committed at, averaged over blocks: 1 = strictly left to right (AR is 1 by construction), 0 = no "
              "relation (easy positions first), negative = right to left.")


def order_text(corr: float | None) -> str:
    """The order correlation with a word on what it means (ORDER_NOTE says how it is computed)."""
    if corr is None:
        return "– (every block committed in one step)"
    if corr > 0.8:
        meaning = "left to right"
    elif corr > 0.3:
        meaning = "leaning left to right"
    elif corr > -0.3:
        meaning = "no left-to-right order"
    else:
        meaning = "leaning right to left"
    return f"{corr:.2f} ({meaning})"


def skew_text(trace: Trace) -> str | None:
    """The detected skew of a scan read from its pixels (None: a text-layer page)."""
    skew = trace.page.skew
    if skew is None:
        return None
    if not skew.angle:
        return "skew 0.0° (straight)"
    return f"skew {skew.angle:+.1f}° (straightened)"


def metric_rows(trace: Trace) -> list[tuple[str, str]]:
    """(metric, value) pairs of one trace, in display order."""
    m, c = trace.metrics, trace_counts(trace)
    rows = [
        ("model", f"{trace.model.name} ({trace.model.params_m} M params, {trace.model.exec_mode})"),
        ("tokens", _fmt(c.tokens)),
        ("NFE (forwards per region, summed over the regions)", _fmt(c.nfe)),
        ("forwards (the shared clock)", _fmt(c.forwards)),
        ("tokens per forward", _fmt(round(c.tokens_per_forward, 4))),
        ("wall time", _fmt(m.wall_s, " s")),
        ("prefill (vision + prompt)", _fmt(m.prefill_s, " s")),
        ("decode", _fmt(m.decode_s, " s")),
        ("time to first token", _fmt(m.time_to_first_token_s, " s")),
        ("CER vs ground truth", "no ground truth" if m.cer is None else f"{100 * m.cer:.2f}%"),
        ("page", skew_text(trace) or "text layer (not straightened)"),
    ]
    if not trace.is_autoregressive:
        rows.append((ORDER_LABEL, order_text(order_correlation(trace))))
        p = trace.params
        rows.append(("settings", f"block {p.get('block_length')}, steps {p.get('steps')}, threshold {p.get('threshold')}, "
                                 f"T {p.get('temperature')}, {p.get('strategy')}"))
    else:
        rows.append((ORDER_LABEL, order_text(1.0)))
        rows.append(("settings", f"greedy, T {trace.params.get('temperature')}"))
    if m.truncated:
        rows.append(("truncated", m.truncated))
    return rows


def metrics_table(traces: list[Trace]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one column per trace."""
    cols = [metric_rows(t) for t in traces]
    headers = ["metric"] + [decoder_label(t.decoder) for t in traces]
    rows = [[name] + [c[i][1] if i < len(c) else "–" for c in cols] for i, (name, _) in enumerate(cols[0])]
    return headers, rows


def diff_segments(hyp: str, ref: str) -> list[tuple[str, str | None]]:
    """Decoded text against ground truth as (text, label) runs for gr.HighlightedText.

    Labels: None (correct), 'substituted' (decoded text that replaces reference text) followed by
    'expected' (the reference text it replaces), 'extra' (decoded text with no counterpart) and
    'missing' (reference text the decode lacks). Decoded text = unlabelled + substituted + extra;
    ground truth = unlabelled + expected + missing.
    """
    out: list[tuple[str, str | None]] = []
    for tag, h, r in diff_ops(hyp, ref):
        if tag == "equal":
            out.append((h, None))
        elif tag == "replace":
            out.append((h, "substituted"))
            out.append((r, "expected"))
        elif tag == "delete":
            out.append((h, "extra"))
        elif tag == "insert":
            out.append((r, "missing"))
    merged: list[tuple[str, str | None]] = []
    for text, label in out:  # merge neighbours with the same label
        if merged and merged[-1][1] == label:
            merged[-1] = (merged[-1][0] + text, label)
        else:
            merged.append((text, label))
    return merged


def forwards_text(trace: Trace) -> str:
    """The forwards and NFE in one phrase that says how they relate (core/counts.py, one source):
    *forwards* are the shared clock's ticks (the player's scrubber), NFE sums each region's forwards
    (plus, for diffusion, one pass per finished block that stores it), so a page of 15 lines shows
    "3 forwards" beside "NFE 68" and both are right."""
    c = trace_counts(trace)
    rate = f"{c.tokens_per_forward:.2f} tokens per forward (tokens / NFE)"
    if c.forwards == c.nfe:
        return f"{counted(c.forwards, 'forward')} = NFE {c.nfe} · {rate}"
    stored = f", plus {counted(c.commit_passes, 'block-storing pass', 'block-storing passes')}" if c.commit_passes else ""
    return (f"{counted(c.forwards, 'forward')} on the clock · NFE {c.nfe} (forwards per region summed over the "
            f"{counted(c.regions, 'region')}{stored}) · {rate}")


def summary_markdown(trace: Trace) -> str:
    """One line of headline numbers (no model text; the trace's own strings escaped: it may be an upload)."""
    m = trace.metrics
    parts = [
        f"**{decoder_label(trace.decoder)}** · {md_text(trace.model.name)}",
        counted(len(trace.regions), "region"), counted(trace_counts(trace).tokens, "token"), forwards_text(trace),
        f"wall {m.wall_s:.2f} s (prefill {m.prefill_s:.2f} s)",
    ]
    if skew_text(trace):
        parts.append(skew_text(trace))
    if m.cer is not None:
        parts.append(f"CER {100 * m.cer:.2f}%")
    if m.truncated:
        parts.append(f"⚠ truncated: {md_text(m.truncated)}")
    return " · ".join(parts)
