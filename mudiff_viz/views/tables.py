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
    """What straightening did to a scan (angle, relighting), or that it was off (the ``straighten``
    knob: the MinerU models' default); None: a text-layer page, or a trace from before the knob."""
    skew = trace.page.skew
    if skew is None:
        return "not straightened (straighten off)" if trace.params.get("straighten") is False else None
    relit = f", relit ({skew.relit:.1f} grey levels)" if skew.relit else ""
    if not skew.angle:
        return f"skew 0.0° (straight){relit}"
    return f"skew {skew.angle:+.1f}° (straightened){relit}"


def _model_text(model) -> str:
    return f"{model.name} ({model.params_m} M params, {model.exec_mode})"


def model_text(trace: Trace) -> str:
    """The model that ran, and for draft and verify both roles: who drafted, who verified."""
    if trace.verifier is not None:
        return f"{_model_text(trace.model)} drafts; {_model_text(trace.verifier)} verifies"
    if trace.is_speculative:
        return f"{_model_text(trace.model)} drafts and verifies itself"
    return _model_text(trace.model)


def _sampling(p: dict) -> str:
    t = p.get("temperature")
    return "greedy" if not t else f"sampled at T {t:g}"


def settings_text(trace: Trace) -> str:
    """The settings this decoder read, as they ran: only keys the trace recorded with a value (a
    draft-and-verify trace has no block, steps or threshold, so it never shows them as None)."""
    p = trace.params
    if trace.is_autoregressive:
        return f"one token per forward, {_sampling(p)}"
    if trace.is_speculative:
        parts = [f"drafts {counted(p['draft_length'], 'token')} past the frontier"] if p.get("draft_length") else []
        acceptance = p.get("acceptance")
        if acceptance == "confidence" and p.get("accept_threshold") is not None:
            parts.append(f"accepts a draft the verifier agrees with or at confidence ≥ {p['accept_threshold']:g}")
        elif acceptance:
            parts.append("accepts a draft only where the verifier agrees" if acceptance == "exact" else f"acceptance {acceptance}")
        if p.get("draft_floor") is not None:
            parts.append(f"draft floor {p['draft_floor']:g}")
        if p.get("draft_branches"):
            parts.append(f"draft branches: {p['draft_branches']}")
        parts.append(_sampling(p))
        return ", ".join(parts)
    named = [("block", "block_length"), ("steps", "steps"), ("threshold", "threshold")]
    parts = [f"{label} {p[key]:g}" for label, key in named if isinstance(p.get(key), (int, float))]
    if p.get("strategy"):
        parts.append(str(p["strategy"]))
    parts.append(_sampling(p))
    return ", ".join(parts)


def metric_rows(trace: Trace) -> list[tuple[str, str]]:
    """(metric, value) pairs of one trace, in display order."""
    m, c = trace.metrics, trace_counts(trace)
    rows = [
        ("model", model_text(trace)),
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
    rows.append((ORDER_LABEL, order_text(1.0 if trace.is_autoregressive else order_correlation(trace))))
    rows.append(("settings", settings_text(trace)))
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
    if graphs_stated(trace):
        parts.append(f"CUDA graphs {md_text(trace.params['cuda_graphs'])}")
    if skew_text(trace):
        parts.append(skew_text(trace))
    if m.cer is not None:
        parts.append(f"CER {100 * m.cer:.2f}%")
    if m.truncated:
        parts.append(f"⚠ truncated: {md_text(m.truncated)}")
    return " · ".join(parts)


def graphs_stated(trace: Trace) -> bool:
    """Whether the summary names the CUDA-graphs choice: on a GPU only (timings against the
    release's eager runs depend on it), and only when the trace recorded it."""
    return isinstance(trace.params.get("cuda_graphs"), str) and trace.params["cuda_graphs"] != "off: no CUDA"
