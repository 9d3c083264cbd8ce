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


def noise_verdict(decoder: str, changes: list[float], verb: str = "shuffling") -> str:
    """What a CER change means next to its seed spread. ``changes``: the change (probed minus
    original, as a fraction) under each seed. An effect is claimed only when every seed moves the
    CER the same way; otherwise the changes are inside the seed spread, and the line says so."""
    who = decoder_label(decoder)
    if not changes:
        return f"{who}: no seed finished, so no change to judge"
    pts = [100 * c for c in changes]
    mid, lo, hi = sum(pts) / len(pts), min(pts), max(pts)
    if len(pts) == 1:
        return (f"{who}: {mid:+.2f} points on one seed, with no spread to judge it against "
                "(more seeds measure it)")
    rng = f"{lo:+.2f} to {hi:+.2f} over {len(pts)} seeds" if f"{lo:.2f}" != f"{hi:.2f}" else f"{lo:+.2f} on all {len(pts)} seeds"
    if lo > 0:
        return f"{who}: {verb} raised CER by {mid:+.2f} points on average, on every seed ({rng})"
    if hi < 0:
        return f"{who}: {verb} lowered CER by {mid:+.2f} points on average, on every seed ({rng})"
    if lo == hi == 0:
        return f"{who}: no effect: CER unchanged on all {len(pts)} seeds"
    return f"{who}: no effect beyond the seed spread ({mid:+.2f} points on average, ±{(hi - lo) / 2:.2f}: {rng})"


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


SPREAD_PENDING = "*Measuring the seed spread: the probed page under {n} further seed(s), through both decoders…*"


def seed_changes(scores: dict, seed: int, further: dict | None) -> dict[str, list[float]]:
    """Per decoder, the CER change under the grid's seed and each further seed (``further``: decoder
    -> seed -> change), in seed order; a decoder without ground truth is left out."""
    out: dict[str, list[float]] = {}
    for decoder in ("diffusion", "ar"):
        o, s = scores.get((decoder, "original")), scores.get((decoder, "shuffled"))
        if not (o and s):
            continue
        by_seed = {seed: s["cer"] - o["cer"], **((further or {}).get(decoder) or {})}
        out[decoder] = [by_seed[k] for k in sorted(by_seed)]
    return out


def seeds_progress_markdown(done: int, total: int, what: str, elapsed_s: float) -> str:
    """The status while the further seeds decode: how many of their decodes are done, and the last."""
    last = f" (last: {md_text(what)})" if done else ""
    return (f"Grid done. Measuring the seed spread: **{done} of {total}** further decodes done{last} · "
            f"{elapsed_s:.0f} s")


def summary_markdown(scores: dict, level: float, seed: int, lines_changed: int, lines_total: int,
                     probe: str = "shuffle", description: str = "", changes: dict[str, list[float]] | None = None) -> str:
    """The headline: what the probe changed and how much each decoder's CER moved (no model text);
    with ``changes`` (per decoder, the change under each seed), what each change means beside its
    seed spread."""
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
    verb = {"shuffle": "shuffling", "occlude": "occluding", "degrade": "degrading"}[probe]
    verdicts = [noise_verdict(d, c, verb) for d, c in (changes or {}).items()]
    if not verdicts:
        verdicts = ["one page and one seed: these changes have no seed spread beside them (raise Seeds to measure it)"]
    return head + "  \n" + " · ".join(parts) + "".join("  \n" + v for v in verdicts)  # our words only: not escaped


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


def bench_markdown(result, n_pages: int, n_seeds: int, levels: list[float]) -> str:
    """The benchmark's headline: what ran and, after a Stop, that the results are partial."""
    n_dec = sum(1 for r in result.rows if not r["reused"])
    what = (f"{n_pages} bundled pages x {n_seeds} seed(s) x levels {', '.join(f'{v:g}' for v in levels)}")
    if result.partial:
        return (f"**Semantic Shuffle benchmark, partial: stopped after {result.finished} of {result.planned} "
                f"decodes** ({RECONSTRUCTION}): planned {what}. The table, figure and downloads hold what finished "
                f"({n_dec} decodes; identical level-0 pages are decoded once).")
    return (f"**Semantic Shuffle benchmark** ({RECONSTRUCTION}): {what}; {n_dec} decodes "
            "(identical level-0 pages are decoded once).")


def bench_progress_markdown(done: int, total: int, what: str, elapsed_s: float, stopping: bool = False) -> str:
    """The benchmark's status while it runs (every second): decodes done of all, the last one, the
    seconds so far, and how to stop it (or that it is stopping)."""
    if stopping:
        return (f"Benchmark: **{done} of {total} decodes** done · {elapsed_s:.0f} s · stopping after the decode in "
                "progress: what finished will show below, marked partial")
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
