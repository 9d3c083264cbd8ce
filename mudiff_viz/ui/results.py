"""What a finished (or streaming, or failed) decode puts on screen, as plain values per output.

Each builder returns a dict keyed by output name; a tab lists its outputs once (``*_OUTPUTS``) and
:func:`ordered` turns a dict into the tuple Gradio expects, with ``gr.skip()`` for outputs a frame
leaves alone. So "clear everything before a run" and "a streamed frame touches only the player" are
one line each, and a failed run never leaves the previous page's result on screen.
"""

from __future__ import annotations

import functools
from typing import Callable

import gradio as gr

from mudiff_viz.core.counts import trace_counts
from mudiff_viz.core.trace import Trace
from mudiff_viz.probes.apply import ProbeSpec
from mudiff_viz.probes.replay import find_source
from mudiff_viz.ui.animation import remember_page
from mudiff_viz.ui.common import one_line, request_dir, safe_stem, write_text, write_trace
from mudiff_viz.views import figures, tables
from mudiff_viz.views.diffs import diff_html
from mudiff_viz.views.export import standalone_compare_html, standalone_html_from_payload, trace_title
from mudiff_viz.views.labels import counted, decoder_label
from mudiff_viz.views.markdown import md_text
from mudiff_viz.views.player import compare_payload, player_payload
from mudiff_viz.views.verdict import verdict_markdown
from mudiff_viz.views.warnings import decode_warnings

DECODE_OUTPUTS = ("status", "warning", "player", "fig_order", "fig_conf", "fig_tpf", "downloads")
COMPARE_OUTPUTS = ("status", "warning", "player", "table", "diff_note", "diff_ar", "diff_diffusion", "diff_third",
                   "fig_forward", "fig_wall", "fig_conf", "fig_order", "downloads", "verdict")
FIGURES = ("fig_order", "fig_conf", "fig_tpf", "fig_forward", "fig_wall")


def ordered(values: dict, names: tuple[str, ...]) -> tuple:
    """The outputs in ``names`` order; names not in ``values`` are left as they are (gr.skip())."""
    return tuple(values[n] if n in values else gr.skip() for n in names)


def message(text: str) -> dict:
    """A player payload that shows one line instead of a trace (before a result, or while waiting)."""
    return {"kind": "message", "message": text}


def cleared(names: tuple[str, ...], status: str, waiting: str) -> dict:
    """Every output emptied, the status saying what is happening: the first thing a run shows."""
    out: dict = {n: None for n in names}
    out["status"] = status
    out["warning"] = gr.update(value="", visible=False)
    out["player"] = message(waiting)
    for n in FIGURES:
        if n in names:
            out[n] = gr.update(value=None, label="", visible=False)  # no empty placeholders before a result
    if "downloads" in names:
        out["downloads"] = gr.update(value=None, visible=False)
    if "table" in names:
        out["table"] = gr.update(value=None)
    return out


DECODE_FAILED = "The decode failed"  # the heading of a failed run's status line (results.failed)


def failed(names: tuple[str, ...], reason: str, heading: str = DECODE_FAILED, player_line: str | None = None) -> dict:
    """Every output emptied and the one-line reason in the status and in the player: what a failed
    run leaves on screen once the toast has gone (the same words as the CLI's ``error:`` line).
    ``player_line``: what the player says instead of repeating the reason (the Trace viewer's
    reason is shown once, in its status line)."""
    out = cleared(names, f"⚠ **{heading}:** {md_text(reason, 400)}",
                  f"⚠ {heading}: {reason}" if player_line is None else player_line)
    out["player"]["failed"] = True
    return out


def stopped(names: tuple[str, ...], run: str = "Run decode") -> dict:
    """Every output emptied after Stop: the run ended before its result, so nothing half-made stays."""
    return cleared(names, f"Decode stopped before it finished: press **{run}** to start one.",
                   "Decode stopped before it finished.")


def is_failure(status, heading: str = DECODE_FAILED) -> bool:
    """Whether a status line is the one :func:`failed` wrote under ``heading``."""
    return isinstance(status, str) and status.startswith(f"⚠ **{heading}:**")


def failure_cleared(names: tuple[str, ...], status, waiting: str, heading: str = DECODE_FAILED) -> tuple:
    """For a page picker's new file: a failure left on screen (:func:`failed`) goes, so the reason
    for the old file never sits under the new one's preview; any other result stays."""
    if not is_failure(status, heading):
        return ordered({}, names)
    out = cleared(names, "", waiting)
    return ordered(out, names)


SAYS_WHY = "mudiff-says-why"  # the app's CSS hides Gradio's bare "Error" pill on outputs with this class


def says_why(outputs: list) -> list:
    """Mark the output components of a run wrapped by :func:`shows_failure` (returned as given): its
    failure puts the reason in their status and player and empties the rest, so Gradio's bare "Error"
    pill on each of them would only cover it (the CSS in ui/app.py hides it)."""
    for component in outputs:
        classes = component.elem_classes or []
        component.elem_classes = [*([classes] if isinstance(classes, str) else classes), SAYS_WHY]
    return outputs


def shows_failure(names: tuple[str, ...], heading: str = DECODE_FAILED, player_line: str | None = None,
                  keep: tuple[str, ...] = ()) -> Callable:
    """For a run generator: when it fails, its last frame is :func:`failed` (the reason stays on
    screen after the toast has gone, and no "Decoding…" is left behind); the error still propagates,
    so the toast shows and an API client gets it. Outputs in ``keep`` stay as they are."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def gen(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:
                yield ordered(failed(tuple(n for n in names if n not in keep), one_line(exc), heading, player_line), names)
                raise

        return gen

    return wrap


def plot(fig) -> dict:
    """A figure for a gr.Plot, its title moved to the component's label (wraps on a phone)."""
    fig, title = figures.untitled(fig)
    return gr.update(value=fig, label=title, show_label=bool(title), visible=True)


def files(paths: list[str]) -> dict:
    return gr.update(value=paths, visible=True)


def clean_page(trace: Trace) -> bool:
    """A bundled sample with no probes applied: a bad reading of it is the model's fault, not the page's."""
    return not trace.page.probes and find_source(trace.page.sha256) is not None


def warning_update(traces: list[Trace]) -> dict:
    """The out-of-range banner: shown when any decode looks like nonsense, with the reasons."""
    lines = []
    for t in traces:
        who = f"{decoder_label(t.decoder)}: " if len(traces) > 1 else ""
        lines += [f"{who}{w}" for w in decode_warnings(t, clean_page=clean_page(t))]
    if not lines:
        return gr.update(value="", visible=False)
    text = "⚠ **This result is probably not a reading of the page.**  \n" + "  \n".join(md_text(x, 400) for x in lines)
    return gr.update(value=text, visible=True)


def page_line(trace: Trace, probes: ProbeSpec | None) -> str:
    page = trace.page
    name = f"**{md_text(page.source or 'upload')}**"
    line = f"page {page.page_index + 1} of {page.page_count} of {name}" if page.page_count and page.page_count > 1 else name
    if probes is not None and probes.active:
        line += f" · probes: {md_text(probes.describe())}"
    return line


def committed_so_far(trace: Trace) -> int:
    """Tokens committed by a decode still running, as its player's header and charts count them
    (core/counts.py on the snapshot: the open blocks' commits included, fillers after a region's end
    of text not). Without step records, the finished blocks' tokens."""
    return trace_counts(trace, partial=True).tokens


def live_status(trace: Trace | None, elapsed_s: float) -> str:
    """The Decode tab's status while it decodes: the counts of the latest frame (the player shows the
    same frame) and the seconds since the click, so it moves every second even inside the prefill."""
    if trace is None:
        return f"Decoding… encoding the page (prefill) · {elapsed_s:.0f} s"
    return (f"Decoding… {counted(committed_so_far(trace), 'token')} committed so far, "
            f"{counted(trace.clock_length, 'forward')} · {elapsed_s:.0f} s")


def streaming_frame(trace: Trace, image_url: str | None, stream: str, label: str | None = None) -> dict:
    """A partial player payload: the trace so far, under a stream id the player keeps its place in."""
    return player_payload(trace, image_url=image_url, label=label, partial=True, stream=stream)


def decode_result(trace: Trace, image_url: str | None, probes: ProbeSpec | None = None, stream: str | None = None) -> dict:
    """Everything the Decode tab shows for a finished decode, downloads written."""
    payload = player_payload(trace, image_url=image_url, stream=stream)
    outdir = request_dir()
    stem = safe_stem(trace.page.source)
    trace_path = write_trace(trace, outdir, stem)
    remember_page(trace_path, image_url)
    html_path = write_text(standalone_html_from_payload(payload, trace_title(trace)), outdir,
                           f"{stem}.{trace.decoder}.replay.html")
    return {
        "status": tables.summary_markdown(trace) + "  \n" + page_line(trace, probes),
        "warning": warning_update([trace]),
        "player": payload,
        "fig_order": plot(figures.order_or_drafts(trace)),
        "fig_conf": plot(figures.confidence_histogram([trace])),
        "fig_tpf": plot(figures.tokens_per_forward([trace])),
        "downloads": files([trace_path, html_path]),
    }


# the Compare tab's panes, by decoder: what each one shows at a glance
PANE_LABELS = {"ar": "AR (one token per forward)", "diffusion": "diffusion (parallel unmasking)",
               "self-speculative": "self-speculative (drafts and verifies itself)",
               "speculative": "speculative (diffusion drafts, AR verifies)"}
DIFF_OUTPUTS = ("diff_ar", "diff_diffusion", "diff_third")  # the word diffs, one per Compare pane


def text_diffs(traces: list[Trace]) -> dict:
    """Each decoded text against the ground truth, word by word (HTML), in pane order."""
    gt = next((t.gt_text for t in reversed(traces) if t.gt_text is not None), None)
    if gt is None:
        note = "This page has no text layer, so there is no ground truth to diff against: the decoded texts are shown as is."
    else:
        note = "Each decode against the page's text layer (ground truth), word by word."
    out = {"diff_note": note, **{n: "" for n in DIFF_OUTPUTS}}
    out.update({n: diff_html(t.text, gt) for n, t in zip(DIFF_OUTPUTS, traces)})
    return out


def compare_panes(traces: list[Trace], image_url: str | None, partial: int | None = None,
                  stream: str | None = None) -> dict:
    """The payload of several decodes of one page on one clock; ``partial``: the index of the pane
    still decoding (the others are done)."""
    panes = [player_payload(t, image_url=image_url, label=PANE_LABELS.get(t.decoder), partial=partial == i, stream=stream)
             for i, t in enumerate(traces)]
    if len(panes) == 1:
        return panes[0]
    out = compare_payload(panes)
    out["partial"], out["stream"] = partial is not None, stream
    return out


def compare_result(traces: list[Trace], image_url: str | None, probes: ProbeSpec | None = None,
                   stream: str | None = None, rounds: list[list[Trace]] | None = None) -> dict:
    """Everything the Compare tab shows for finished decodes of one page (AR first), downloads written;
    ``rounds``: every round's traces (``traces`` is the last), for the verdict and its spread."""
    headers, rows = tables.metrics_table(traces)
    outdir = request_dir()
    last = traces[-1]
    stem = safe_stem(last.page.source)
    paths = [write_trace(t, outdir, stem) for t in traces]
    for path in paths:
        remember_page(path, image_url)
    names = " vs ".join(decoder_label(t.decoder) for t in traces)
    paths.append(write_text(standalone_compare_html(traces, [image_url] * len(traces), f"{last.page.source}: {names}"),
                            outdir, f"{stem}.compare.replay.html"))
    diffusion = next((t for t in traces if t.decoder == "diffusion"), last)
    return {
        "status": "  \n".join(tables.summary_markdown(t) for t in traces) + "  \n" + page_line(last, probes),
        "warning": warning_update(traces),
        "player": compare_panes(traces, image_url, stream=stream),
        "table": gr.update(value=rows, headers=headers, label="Metrics" if not rounds or len(rounds) < 2 else
                           f"Metrics of the last of {len(rounds)} rounds (the verdict above covers every round)"),
        **text_diffs(traces),
        "fig_forward": plot(figures.progress_curves(traces, "forward")),
        "fig_wall": plot(figures.progress_curves(traces, "wall")),
        "fig_conf": plot(figures.confidence_histogram(traces)),
        "fig_order": plot(figures.commit_order_heatmap(diffusion)),
        "downloads": files(paths),
        "verdict": verdict_markdown(rounds or [traces]),
    }
