"""The probe benchmark: decode original and perturbed pages with both decoders, score them.

Axes: Semantic Shuffle level x occluded fraction x degradation x seed. For every page and cell the
page is shuffled (level 0 goes through the same re-render as a control), then words are occluded
(seeded), then the page is degraded (seeded); both decoders run on it, and one row per decoder
records CER against the (shuffled) ground truth, cost (tokens, NFE, wall time), mean token
confidence, how many erroneous tokens were "confidently wrong", and with occlusion the words
recovered, the CER on the rest of the text and the decoding-order statistics of docs/probes.md.
Identical pages (level 0 under every seed, with nothing else applied) are decoded once.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Callable, Sequence

from rapidfuzz.distance import Levenshtein

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.core.metrics import CONFIDENT, cer, first_step_share, mean_steps_per_block
from mudiff_viz.core.order import order_summary
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.inputs.pages import read_source, sniff_kind
from mudiff_viz.probes.perturb import degrade, occlude
from mudiff_viz.probes.shuffle import check_level, shuffle_page
from mudiff_viz.views.labels import cer_percent, decoder_colour
from mudiff_viz.views.shuffle import noise_verdict

ROW_FIELDS = [
    "page", "level", "occlusion", "degrade", "seed", "decoder", "cer", "tokens", "nfe", "wall_s", "mean_confidence",
    "error_tokens", "confident_error_tokens", "gt_chars", "occluded_words", "recovered_words", "recovery_rate",
    "cer_rest", "first_step_share", "occluded_last_step_share", "other_last_step_share", "model", "reused",
]
CLEAN = "none"  # the name of "no degradation"

Progress = Callable[[int, int, str], None]


@dataclass
class BenchPage:
    """One benchmark input: file bytes (PDF or image), and for images the original's ground truth."""

    name: str
    data: bytes
    page_index: int = 0
    gt_text: str | None = None
    trusted: bool = False  # our own synthetic PDFs render in-process


class BenchStopped(Exception):
    """Raised by a benchmark's ``progress`` callback to stop it after the decode just finished: the
    benchmark then returns what finished, marked partial (the app's Stop button)."""


@dataclass
class BenchResult:
    rows: list[dict]
    figure: object  # plotly Figure
    summary: dict = field(default_factory=dict)  # per decoder: the shuffle axis (no occlusion, no degradation)
    conditions: list[dict] = field(default_factory=list)  # per decoder and cell of the grid (condition_table)
    planned: int = 0  # decodes the benchmark was asked for (rows, reused ones included)
    partial: bool = False  # stopped before every planned decode finished: rows are what finished

    @property
    def finished(self) -> int:
        return len(self.rows)


def bench_pages_from_paths(
    paths: Sequence[str | Path], page_index: int = 0, limits: Limits | None = None
) -> list[BenchPage]:
    """Benchmark inputs from files; an image needs a sidecar ``<stem>.txt`` with its ground truth."""
    limits = limits or current()
    out = []
    for p in paths:
        path = Path(p)
        data, name = read_source(path, limits)
        gt = None
        if sniff_kind(data) != "pdf":
            sidecar = path.with_suffix(".txt")
            if not sidecar.is_file():
                raise UserInputError(
                    f"{path}: an image needs its ground truth in {sidecar.name} (one line per text line)"
                )
            gt = sidecar.read_text(encoding="utf-8", errors="replace")
        out.append(BenchPage(name=name, data=data, page_index=page_index, gt_text=gt))
    return out


def parse_models(spec: str, decoders: Sequence[str] = ("diffusion", "ar")) -> dict[str, str]:
    """``nano`` (one spec for every decoder) or ``diffusion=SPEC,ar=SPEC`` (one per decoder)."""
    if "=" not in spec:
        return {d: spec for d in decoders}
    out: dict[str, str] = {}
    for part in spec.split(","):
        key, _, value = part.partition("=")
        if key.strip() not in ("diffusion", "ar") or not value.strip():
            raise UserInputError(f"bad model spec part {part!r}: use diffusion=SPEC,ar=SPEC")
        out[key.strip()] = value.strip()
    missing = [d for d in decoders if d not in out]
    if missing:
        raise UserInputError(f"no model given for decoder(s) {', '.join(missing)}")
    return {d: out[d] for d in decoders}


def parse_levels(text: str) -> list[float]:
    try:
        levels = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserInputError(f"levels must be comma-separated numbers, got {text!r}") from None
    if not levels:
        raise UserInputError("no levels given")
    return sorted({check_level(v) for v in levels})


# ---- scoring ----------------------------------------------------------------------------------


def _token_text(trace) -> tuple[str, list[tuple[int, float] | None]]:
    """The page text rebuilt from the tokens (regions joined by newlines) and, per character, its
    (page-wide token number, confidence), or None for the newline between regions."""
    chars: list[str] = []
    owners: list[tuple[int, float] | None] = []
    n = 0
    for ri, region in enumerate(trace.regions):
        if ri:
            chars.append("\n")
            owners.append(None)
        for tok in region.tokens:
            if not tok.stop:
                chars.append(tok.text)
                owners.extend([(n, tok.confidence)] * len(tok.text))
            n += 1
    return "".join(chars), owners


def token_errors(trace, gt: str, threshold: float = CONFIDENT) -> tuple[int, int]:
    """(erroneous decoded tokens, of which confidence > threshold).

    The decoded text is aligned to the ground truth with a Levenshtein edit script (rapidfuzz); a
    token is erroneous when any of its characters is substituted or deleted (extra) in that
    script. Missing characters have no decoded token, so they count in CER but not here.
    """
    hyp, owners = _token_text(trace)
    wrong: dict[int, float] = {}
    for op in Levenshtein.editops(hyp, gt):
        owner = owners[op.src_pos] if op.tag in ("replace", "delete") else None
        if owner is not None:
            wrong[owner[0]] = owner[1]
    return len(wrong), sum(1 for c in wrong.values() if c > threshold)


def score_row(trace, gt: str) -> dict:
    """The measured part of a row: CER against ``gt``, the trace's costs and confidences, and (with
    occluded words) recovery, CER on the rest and the order statistics."""
    confs = [t.confidence for r in trace.regions for t in r.tokens if not t.stop]
    n_err, n_conf = token_errors(trace, gt)
    order = order_summary([trace]) if trace.page.occluded else {}
    return {
        "cer": round(cer(trace.text, gt), 5),
        "tokens": trace.metrics.tokens,
        "nfe": trace.metrics.nfe,
        "wall_s": float(trace.metrics.wall_s),
        "mean_confidence": round(mean(confs), 5) if confs else None,
        "error_tokens": n_err,
        "confident_error_tokens": n_conf,
        "gt_chars": len(gt),
        "steps_per_block": mean_steps_per_block(trace),
        **{k: order.get(k) for k in ("occluded_words", "recovered_words", "recovery_rate", "cer_rest",
                                     "occluded_last_step_share", "other_last_step_share")},
        "first_step_share": first_step_share(trace),
    }


# ---- the run ----------------------------------------------------------------------------------


def degrade_name(spec: dict) -> str:
    return ",".join(f"{k}={v:g}" for k, v in spec.items()) or CLEAN


def run_shuffle_benchmark(
    pages: Sequence[BenchPage],
    levels: Sequence[float] = (0.0, 0.25, 0.5, 1.0),
    seeds: int | Sequence[int] = 3,
    model: str = "nano",
    progress: Progress | None = None,
    decoders: Sequence[str] = ("diffusion", "ar"),
    dpi: float = 150,
    limits: Limits | None = None,
    knobs: dict | None = None,
    occlusions: Sequence[float] = (0.0,),
    degradations: Sequence[dict] = ({},),
    decode: Callable[..., Trace] | None = None,
) -> BenchResult:
    """Every page at every shuffle level x occluded fraction x degradation, under every seed,
    decoded by each decoder and scored.

    ``seeds`` is a count (seeds 0..N-1) or explicit seeds. ``model`` is one spec for both decoders
    or ``diffusion=SPEC,ar=SPEC``. ``degradations``: knob dicts for :func:`degrade` ({} = none).
    ``progress(done, total, message)`` is called after each decode; if it raises :class:`BenchStopped`,
    the rows so far come back as a partial result (summary and figure of what finished). ``decode``:
    ``decode_page`` or a stand-in with its arguments (the app's ZeroGPU calls, one per decode).
    """
    limits = limits or current()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    levels = sorted({check_level(v) for v in levels})
    occlusions = sorted(set(occlusions))
    specs = parse_models(model, decoders)
    if not pages or not seed_list:
        raise UserInputError("the benchmark needs at least one page and one seed")
    total = len(pages) * len(seed_list) * len(levels) * len(occlusions) * len(degradations) * len(decoders)
    rows: list[dict] = []
    done_cache: dict[tuple[str, str], dict] = {}
    done = 0
    partial = False
    try:
        for bp in pages:
            for seed in seed_list:
                for level in levels:
                    sp = shuffle_page(bp.data, level, seed, page_index=bp.page_index, dpi=dpi, gt_text=bp.gt_text,
                                      trusted=bp.trusted, rerender=True, limits=limits)
                    if sp.gt_text is None:
                        raise UserInputError(f"{bp.name}: ground truth unknown at level {level}: {sp.result.note}")
                    for fraction in occlusions:
                        occluded = occlude(sp.page, fraction=fraction, seed=seed).page if fraction else sp.page
                        for spec in degradations:
                            page = degrade(occluded, seed=seed, **spec).page if spec else occluded
                            key = hashlib.sha256(page.image.tobytes() + sp.gt_text.encode()).hexdigest()
                            for decoder in decoders:
                                cached = done_cache.get((key, decoder))
                                if cached is None:
                                    # recorded: the order statistics (steps per block, first-step share) need the steps
                                    params = make_params(limits, **{**(knobs or {}), "record": True})
                                    trace = (decode or decode_page)(page, model=specs[decoder], decoder=decoder,
                                                                    params=params)
                                    cached = done_cache[(key, decoder)] = score_row(trace, sp.gt_text)
                                    reused = False
                                else:
                                    reused = True
                                rows.append({"page": bp.name, "level": level, "occlusion": fraction,
                                             "degrade": degrade_name(spec), "seed": seed, "decoder": decoder, **cached,
                                             "model": specs[decoder], "reused": reused})
                                done += 1
                                if progress:
                                    msg = (f"{bp.name} level {level:g} occlusion {fraction:g} {degrade_name(spec)} seed {seed} "
                                           f"{decoder}: CER {cer_percent(cached['cer'])}")
                                    progress(done, total, msg)
    except BenchStopped:
        partial = len(rows) < total
    return bench_result(rows, planned=total, partial=partial)


def bench_result(rows: list[dict], planned: int = 0, partial: bool = False) -> BenchResult:
    """Figure, summary and grid of the rows (all of them, or those that finished before a stop)."""
    title = f" · partial: {len(rows)} of {planned} decodes, stopped" if partial else ""
    return BenchResult(rows=rows, figure=shuffle_figure(base_rows(rows), title), summary=summarize(base_rows(rows)),
                       conditions=condition_table(rows), planned=planned or len(rows), partial=partial)



# ---- summaries and the figure -----------------------------------------------------------------


def base_rows(rows: list[dict]) -> list[dict]:
    """The shuffle axis: rows with the lowest occlusion and no degradation (all rows if none)."""
    if not rows:
        return rows
    low = min(r.get("occlusion", 0.0) for r in rows)
    base = [r for r in rows if r.get("occlusion", 0.0) == low and r.get("degrade", CLEAN) == CLEAN]
    return base or rows


def _seed_stat(sel: list[dict], key: str) -> tuple[float | None, list[float] | None]:
    """Mean over pages per seed, then the mean and min-max of those per-seed means."""
    per_seed = []
    for s in sorted({r["seed"] for r in sel}):
        vals = [r[key] for r in sel if r["seed"] == s and r.get(key) is not None]
        if vals:
            per_seed.append(mean(vals))
    if not per_seed:
        return None, None
    return round(mean(per_seed), 5), [round(min(per_seed), 5), round(max(per_seed), 5)]


def condition_table(rows: list[dict]) -> list[dict]:
    """One entry per decoder and grid cell (level, occlusion, degradation): CER and, with occlusion,
    recovery, CER on the rest and the occluded tokens' last-step share, each as a mean over seeds
    with its seed range (the spread that says whether a change is real)."""
    cells = sorted({(r["decoder"], r["level"], r.get("occlusion", 0.0), r.get("degrade", CLEAN)) for r in rows},
                   key=lambda c: (c[0] != "diffusion", c[0], c[1], c[2], c[3] != CLEAN, c[3]))
    out = []
    for decoder, level, occ, deg in cells:
        sel = [r for r in rows if r["decoder"] == decoder and r["level"] == level and r.get("occlusion", 0.0) == occ
               and r.get("degrade", CLEAN) == deg]
        entry = {"decoder": decoder, "level": level, "occlusion": occ, "degrade": deg, "pages": len({r["page"] for r in sel}),
                 "seeds": len({r["seed"] for r in sel})}
        for key in ("cer", "recovery_rate", "cer_rest", "occluded_last_step_share", "first_step_share", "steps_per_block",
                    "mean_confidence"):
            entry[key], entry[f"{key}_seed_range"] = _seed_stat(sel, key)
        out.append(entry)
    return out


def condition_markdown(conditions: list[dict]) -> str:
    """The grid as a markdown table (percentages with their seed ranges)."""
    def pct(v, rng):
        return "–" if v is None else f"{100 * v:.2f}% [{100 * rng[0]:.2f}, {100 * rng[1]:.2f}]"

    def num(v):
        return "–" if v is None else f"{v:.2f}"

    lines = ["| decoder | level | occluded | degradation | CER [seed range] | occluded words recovered | CER on the rest "
             "| occluded tokens at the block's last step | first-step commits | steps / block | mean confidence |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in conditions:
        lines.append(f"| {c['decoder']} | {c['level']:g} | {c['occlusion']:g} | {c['degrade']} | "
                     f"{pct(c['cer'], c['cer_seed_range'])} | {pct(c['recovery_rate'], c['recovery_rate_seed_range'])} | "
                     f"{pct(c['cer_rest'], c['cer_rest_seed_range'])} | "
                     f"{pct(c['occluded_last_step_share'], c['occluded_last_step_share_seed_range'])} | "
                     f"{pct(c['first_step_share'], c['first_step_share_seed_range'])} | {num(c['steps_per_block'])} | "
                     f"{num(c['mean_confidence'])} |")
    return "\n".join(lines) + "\n"


def _by(rows: list[dict], decoder: str, level: float) -> list[dict]:
    return [r for r in rows if r["decoder"] == decoder and r["level"] == level]


def seed_means(rows: list[dict], decoder: str, level: float) -> dict[int, float]:
    """Mean CER over pages, per seed (the spread over seeds is the spread of these)."""
    sel = _by(rows, decoder, level)
    return {s: mean(r["cer"] for r in sel if r["seed"] == s) for s in sorted({r["seed"] for r in sel})}


def summarize(rows: list[dict]) -> dict:
    """Per decoder: mean CER per level (over pages and seeds), its spread over seeds, the CER change
    from level 0 to 1 (lowest to highest level when those are absent), and the confidently-wrong
    share (erroneous tokens with confidence > 0.9 over all erroneous tokens) per level."""
    out: dict = {}
    for decoder in sorted({r["decoder"] for r in rows}, key=lambda d: (d != "diffusion", d)):
        levels = sorted({r["level"] for r in rows if r["decoder"] == decoder})
        cer_by, spread, share = {}, {}, {}
        for lv in levels:
            per_seed = list(seed_means(rows, decoder, lv).values())
            cer_by[lv] = round(mean(per_seed), 5)
            spread[lv] = [round(min(per_seed), 5), round(max(per_seed), 5)]
            sel = _by(rows, decoder, lv)
            errs = sum(r["error_tokens"] for r in sel)
            share[lv] = round(sum(r["confident_error_tokens"] for r in sel) / errs, 4) if errs else None
        lo = 0.0 if 0.0 in cer_by else levels[0]
        hi = 1.0 if 1.0 in cer_by else levels[-1]
        errs = sum(r["error_tokens"] for r in rows if r["decoder"] == decoder)
        conf = sum(r["confident_error_tokens"] for r in rows if r["decoder"] == decoder)
        at_lo, at_hi = seed_means(rows, decoder, lo), seed_means(rows, decoder, hi)
        out[decoder] = {
            "cer_change_by_seed": {s: round(at_hi[s] - at_lo[s], 5) for s in at_hi if s in at_lo},
            "cer_by_level": cer_by,
            "cer_seed_range": spread,
            "from_level": lo,
            "to_level": hi,
            "cer_change": round(cer_by[hi] - cer_by[lo], 5),
            "confident_error_share_by_level": share,
            "confident_error_share": round(conf / errs, 4) if errs else None,
            "pages": len({r["page"] for r in rows if r["decoder"] == decoder}),
            "seeds": len({r["seed"] for r in rows if r["decoder"] == decoder}),
        }
    return out


def summary_lines(summary: dict) -> list[str]:
    """One human line per decoder (what the CLI prints)."""
    lines = []
    for decoder, s in summary.items():
        share = s["confident_error_share"]
        lo, hi = s["from_level"], s["to_level"]
        lines.append(
            f"{decoder}: CER {100 * s['cer_by_level'][lo]:.2f}% at level {lo:g} -> "
            f"{100 * s['cer_by_level'][hi]:.2f}% at level {hi:g} (change {100 * s['cer_change']:+.2f} points); "
            f"confidently wrong (conf > {CONFIDENT}): "
            + (f"{100 * share:.1f}% of erroneous tokens" if share is not None else "no erroneous tokens")
        )
        if hi != lo:
            lines.append(noise_verdict(decoder, list(s["cer_change_by_seed"].values())))
    return lines


def shuffle_figure(rows: list[dict], note: str = ""):
    """CER vs shuffle level per decoder: mean over seeds with the min-max range of the per-seed
    means as error bars, and each seed's mean as a faint point; ``note`` ends the title."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for decoder in sorted({r["decoder"] for r in rows}, key=lambda d: (d != "diffusion", d)):
        color = decoder_colour(decoder)
        levels = sorted({r["level"] for r in rows if r["decoder"] == decoder})
        per_level = [seed_means(rows, decoder, lv) for lv in levels]
        means = [mean(m.values()) for m in per_level]
        fig.add_trace(go.Scatter(
            x=levels, y=means, mode="lines+markers", name=decoder, line={"color": color},
            error_y={"type": "data", "symmetric": False,
                     "array": [max(m.values()) - mu for m, mu in zip(per_level, means)],
                     "arrayminus": [mu - min(m.values()) for m, mu in zip(per_level, means)]},
        ))
        fig.add_trace(go.Scatter(
            x=[lv for lv, m in zip(levels, per_level) for _ in m],
            y=[v for m in per_level for v in m.values()],
            text=[f"seed {s}" for m in per_level for s in m], mode="markers", showlegend=False,
            marker={"color": color, "opacity": 0.35, "size": 6}, name=f"{decoder} (per seed)",
        ))
    n_pages = len({r["page"] for r in rows})
    n_seeds = len({r["seed"] for r in rows})
    fig.update_layout(
        title=f"Semantic Shuffle (our reconstruction): CER vs shuffle level ({n_pages} pages x {n_seeds} seeds){note}",
        xaxis_title="shuffle level (fraction of each line's words permuted)",
        yaxis_title="CER (mean over pages; bars: range over seeds)",
        yaxis={"tickformat": ".2%", "rangemode": "tozero"},  # from zero: a flat line must look flat
        template="plotly_white",
    )
    return fig


def write_outputs(result: BenchResult, out_dir: str | Path) -> dict[str, Path]:
    """results.json (the rows), results.csv, summary.json (with the grid), conditions.md and an
    offline figure.html."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("results.json", "results.csv", "summary.json", "conditions.md", "figure.html")}
    paths["results.json"].write_text(json.dumps(result.rows, indent=1), encoding="utf-8")
    with paths["results.csv"].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=ROW_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(result.rows)
    summary = {d: {k: ({str(lv): v for lv, v in val.items()} if isinstance(val, dict) else val) for k, val in s.items()}
               for d, s in result.summary.items()}
    paths["summary.json"].write_text(json.dumps({**summary, "conditions": result.conditions}, indent=1), encoding="utf-8")
    paths["conditions.md"].write_text(condition_markdown(result.conditions), encoding="utf-8")
    result.figure.write_html(paths["figure.html"], include_plotlyjs=True, full_html=True)
    return paths
