"""Semantic Shuffle views: the 2x2 player grid, the per-pane scores and the benchmark summary.

Pure functions of traces and scores (no model, no Gradio). The grid is an ordinary compare payload
with four panes, so the browser plays them on the player's one shared clock; ``layout: "grid"`` and
per-pane ``short`` names, colours and dashes only tell the player how to lay them out and label them.
"""

from __future__ import annotations

from mudiff_viz.core.metrics import CONFIDENT
from mudiff_viz.core.trace import Trace
from mudiff_viz.views.diffs import diff_html
from mudiff_viz.views.labels import decoder_colour, decoder_label
from mudiff_viz.views.markdown import md_text
from mudiff_viz.views.player import compare_payload, player_payload
from mudiff_viz.views.tables import diff_segments

GRID = (("diffusion", "original"), ("diffusion", "shuffled"), ("ar", "original"), ("ar", "shuffled"))
RECONSTRUCTION = "our reconstruction of the paper's unpublished Semantic Shuffle"


PROBE_NAMES = {"shuffle": "shuffled", "occlude": "occluded", "degrade": "degraded"}


def column_name(column: str, level: float, probe: str = "shuffle") -> str:
    if column == "original":
        return "original page"
    return f"shuffled page (level {level:g})" if probe == "shuffle" else f"{PROBE_NAMES[probe]} page"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.2f}%"  # as the benchmark's summary lines print it


def grid_payload(traces: dict, images: dict, level: float, probe: str = "shuffle") -> dict:
    """Four panes (diffusion/AR x original/shuffled) on one clock, coloured right vs ground truth.

    ``traces`` and ``images`` map (decoder, column) to a Trace and a page image data URL; while the
    decodes run, ``traces`` holds the finished ones and the player shows those side by side.
    """
    panes = []
    for decoder, column in GRID:
        if (decoder, column) not in traces:  # still decoding: the finished panes play meanwhile
            continue
        p = player_payload(traces[(decoder, column)], image_url=images.get(column),
                           label=f"{decoder_label(decoder)} · {column_name(column, level, probe)}")
        p["short"] = f"{decoder_label(decoder)} {column if column == 'original' else PROBE_NAMES[probe]}"
        p["colour"] = decoder_colour(decoder)
        p["dash"] = column == "shuffled"
        panes.append(p)
    out = compare_payload(panes)
    if len(panes) == len(GRID):
        out["layout"] = "grid"
    out["options"] = {"colourBy": "correct"}
    return out


def score_table(scores: dict, level: float, probe: str = "shuffle") -> tuple[list[str], list[list[str]]]:
    """One row per decoder: CER on each page, the change, erroneous and confidently wrong tokens."""
    right = f"shuffled ({level:g})" if probe == "shuffle" else PROBE_NAMES[probe]
    name = PROBE_NAMES[probe]
    headers = ["decoder", "CER original", f"CER {right}", "change (points)",
               f"wrong tokens (original → {name})", f"confidently wrong, conf > {CONFIDENT} (original → {name})"]
    rows = []
    for decoder in ("diffusion", "ar"):
        o, s = scores.get((decoder, "original")), scores.get((decoder, "shuffled"))
        change = f"{100 * (s['cer'] - o['cer']):+.2f}" if o and s else "–"
        wrong = f"{o['error_tokens'] if o else '–'} → {s['error_tokens'] if s else '–'}"
        conf = f"{_share(o)} → {_share(s)}"
        rows.append([decoder_label(decoder), _pct(o and o["cer"]), _pct(s and s["cer"]), change, wrong, conf])
    return headers, rows


def _share(score: dict | None) -> str:
    """Confidently wrong tokens as "k of n wrong (share)": one wording for every case, so a pane
    with no wrong tokens and a pane whose wrong tokens were all unsure cannot be mistaken."""
    if not score:
        return "–"
    wrong = score["error_tokens"]
    if not wrong:
        return "no wrong tokens"
    return f"{score['confident_error_tokens']} of {wrong} ({_pct(confident_share(score))})"


def confident_share(score: dict | None) -> float | None:
    """Share of erroneous tokens the model was confident about (> CONFIDENT); None without errors."""
    if not score or not score["error_tokens"]:
        return None
    return score["confident_error_tokens"] / score["error_tokens"]


def summary_markdown(scores: dict, level: float, seed: int, lines_changed: int, lines_total: int,
                     probe: str = "shuffle", description: str = "") -> str:
    """The headline: what the probe changed and how much each decoder's CER moved (no model text)."""
    if probe == "shuffle":
        head = (f"**Semantic Shuffle** ({RECONSTRUCTION}) · level {level:g}, seed {seed}: "
                f"{lines_changed} of {lines_total} lines reordered.")
    else:
        head = f"**{PROBE_NAMES[probe].capitalize()} page** · {md_text(description)}."
    parts = []
    for decoder in ("diffusion", "ar"):
        o, s = scores.get((decoder, "original")), scores.get((decoder, "shuffled"))
        if o and s:
            parts.append(f"**{decoder_label(decoder)}** CER {_pct(o['cer'])} → {_pct(s['cer'])} "
                         f"({100 * (s['cer'] - o['cer']):+.2f} points)")
    if not parts:
        return head + " No ground truth for this page (an image needs its text: the bundled scan has it), so no CER."
    return head + "  \n" + " · ".join(parts)


def pane_diffs(traces: dict, gts: dict) -> list[list[tuple[str, str | None]]]:
    """Decoded text against its page's ground truth, per pane in GRID order (for gr.HighlightedText)."""
    out = []
    for decoder, column in GRID:
        trace: Trace = traces[(decoder, column)]
        gt = gts.get(column)
        out.append(diff_segments(trace.text, gt) if gt is not None else [(trace.text, None)])
    return out


def pane_diff_html(traces: dict, gts: dict) -> list[str]:
    """Decoded text against its page's ground truth, word by word, per pane in GRID order (HTML)."""
    return [diff_html(traces[key].text, gts.get(key[1])) for key in GRID]


def bench_table(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The benchmark summary as a table: CER per level, the change, the confidently-wrong share."""
    levels = sorted({lv for s in summary.values() for lv in s["cer_by_level"]})
    headers = ["decoder"] + [f"CER at {lv:g}" for lv in levels] + ["change (points)", f"confidently wrong (conf > {CONFIDENT})"]
    rows = []
    for decoder, s in summary.items():
        cells = [_pct(s["cer_by_level"].get(lv)) for lv in levels]
        change = f"{100 * s['cer_change']:+.2f} ({s['from_level']:g} → {s['to_level']:g})"
        rows.append([decoder_label(decoder), *cells, change, _pct(s["confident_error_share"])])
    return headers, rows


def bench_progress_markdown(done: int, total: int, what: str, elapsed_s: float) -> str:
    """The benchmark's status while it runs (every second): decodes done of all, the last one, the
    seconds so far, and how to stop it."""
    if not total:
        return f"Benchmark: loading the models and decoding the first page… · {elapsed_s:.0f} s · *Stop* ends it"
    return (f"Benchmark: **{done} of {total} decodes** done (last: {md_text(what)}) · {elapsed_s:.0f} s · "
            "*Stop* ends it after the decode in progress")


def progress_markdown(k: int, what: str, done: int, total: int, finished: int, elapsed_s: float) -> str:
    """The Shuffle tab's status while its four decodes run: which decode, its own counter (named:
    each decode counts its own blocks or tokens, so the total changes from one decode to the next),
    how many panes are done and the seconds so far (it moves every second, even inside a long block)."""
    if not k:
        return f"Loading the models and encoding the pages… · {elapsed_s:.0f} s"
    if finished >= 4:
        return f"All four decodes done: scoring them and drawing the grid… · {elapsed_s:.0f} s"
    if finished >= k:  # the next decode has not reported yet: it is encoding its page
        return (f"Decoding {finished + 1} of 4: starting (encoding its page) · {finished} of 4 panes done, "
                f"playing below · {elapsed_s:.0f} s")
    unit = "tokens" if what.startswith("AR") else "blocks"
    return (f"Decoding {k} of 4: **{what}** ({unit} {done}/{total} of this decode) · "
            f"{finished} of 4 panes done{', playing below' if finished else ''} · {elapsed_s:.0f} s")
