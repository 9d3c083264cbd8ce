"""Benchmarks: ``python -m mudiff_viz bench`` and ``python -m mudiff_viz sweep``.

Every ratio is measured in ONE run on the same pages, warm, as medians over repeats, so machine
speed cancels out: diffusion vs AR decode time (prefill excluded and reported separately), recording
on vs off. Nothing here asserts timings; the numbers go to JSON and docs/benchmarks.md.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import replace

from mudiff_viz.core.metrics import cer
from mudiff_viz.core.peak_memory import own_peak_rss_mb
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.page import Page


def bench_pages(n: int, seed: int = 99) -> list[Page]:
    """Held-out synthetic pages (test split), 150 DPI, the three Base-14 families at 10-12 pt."""
    rng = random.Random(seed)
    fonts = list(synth.FONTS)
    pages = []
    for i in range(n):
        style = synth.PageStyle(font=fonts[i % 3], size=rng.choice([10.0, 11.0, 12.0]), columns=1, margin=72)
        pages.append(synth.random_page(rng, "test", style=style).render(150))
    return pages


def _peak_rss_mb() -> float:
    return own_peak_rss_mb()


def _decode(page: Page, model: str, decoder: str, params, one_region_at_a_time: bool = False):
    """One decode; ``one_region_at_a_time``: the latency regime (a batch of one region, as the real
    model runs) instead of the page batch."""
    return decode_page(page, model=model, decoder=decoder, params=params, batch_regions=not one_region_at_a_time)


REGIMES = {"page_batch": False, "one_region_at_a_time": True}
DECODERS = ("diffusion", "ar", "self-speculative", "speculative")
RECORDED = ("diffusion", "ar", "self-speculative")  # also timed with recording off (drafts included)
QUICK = {"n_pages": 3, "repeats": 2}  # the first pages of the full bench, so both measure the same thing
FULL = {"n_pages": 6, "repeats": 3}
BOOTSTRAP = 2000


def norec(decoder: str) -> str:
    return f"{decoder}_norec"


def bench_variants(decoders, model: str, ar_model: str, params) -> dict:
    """Every timed variant: name -> (decoder, model spec, params). The speculative decoder's
    verifier is the AR model; recording-off twins of the :data:`RECORDED` decoders measure the
    trace's cost."""
    out = {}
    for d in decoders:
        spec = ar_model if d == "ar" else model
        p = replace(params, more={**params.more, "verifier": params.verifier or ar_model}) if d == "speculative" else params
        out[d] = (d, spec, p)
    for d in decoders:
        if d in RECORDED:
            decoder, spec, p = out[d]
            out[norec(d)] = (decoder, spec, replace(p, record=False))
    return out


def _regime(pages, variants: dict, repeats, sequential, log, name):
    """Every variant on every page: one untimed warm-up decode per variant and page (new shapes
    pay one-off costs), then ``repeats`` timed passes, the variants' order rotated each pass so no
    variant always runs first. Returns per-page rows with every timed run kept."""
    names = tuple(variants)
    decoders = [v for v in names if variants[v][2].record]
    per_page = []
    for i, page in enumerate(pages):
        for v in names:  # warm-up
            decoder, spec, params = variants[v]
            _decode(page, spec, decoder, params, sequential)
        runs: dict[str, list] = {v: [] for v in names}
        for r in range(repeats):
            order = names[r % len(names):] + names[:r % len(names)]
            for v in order:
                decoder, spec, params = variants[v]
                runs[v].append(_decode(page, spec, decoder, params, sequential))
        first = runs[decoders[0]][0]
        row = {"page": i, "chars": len(page.text or ""), "regions": len(first.regions)}
        for v in names:
            row[v] = {m: [getattr(t.metrics, m) for t in runs[v]] for m in ("wall_s", "prefill_s", "decode_s")}
        for v in decoders:
            t = runs[v][0]
            m = t.metrics
            row[v].update(tokens=m.tokens, nfe=m.nfe, tokens_per_forward=m.tokens_per_forward, cer=m.cer,
                          trace_bytes=len(t.to_json().encode()), recording_s=[x.metrics.recording_s for x in runs[v]])
            if m.get("verify_forwards") is not None:
                row[v].update(verify_forwards=m.verify_forwards, draft_forwards=m.draft_forwards, drafted=m.drafted,
                              accepted=m.accepted)
        if "ar" in runs:  # the speculative decoder is exact: its tokens are the AR verifier's
            ids = {v: [[tok.id for tok in r.tokens] for r in runs[v][0].regions] for v in decoders}
            for v in decoders:
                row[v]["tokens_equal_ar"] = ids[v] == ids["ar"]
        per_page.append(row)
        log(f"[{name}] page {i}: " + ", ".join(
            f"{v} decode {statistics.median(row[v]['decode_s']):.2f}s (tpf {row[v]['tokens_per_forward']:.2f}, "
            f"CER {100 * (row[v]['cer'] or 0):.2f}%)" for v in decoders))
    return per_page


def ratio_stats(rows: list[dict], num: tuple[str, str], den: tuple[str, str], seed: int = 0) -> dict:
    """A ratio of sums over pages (``num``/``den`` name (variant, metric)), from per-page medians over
    repeats, with two spreads: ``interval``, the 95% bootstrap interval over pages (what another
    set of pages could give: a quick run on fewer pages should land inside the full run's), and
    ``repeat_range``, the ratio of each timed pass alone (timing noise on these pages)."""
    def med(row, key):
        return statistics.median(row[key[0]][key[1]])

    value = sum(med(r, num) for r in rows) / sum(med(r, den) for r in rows)
    rng = random.Random(seed)
    boots = []
    for _ in range(BOOTSTRAP if len(rows) > 1 else 0):
        pick = [rows[rng.randrange(len(rows))] for _ in rows]
        boots.append(sum(med(r, num) for r in pick) / sum(med(r, den) for r in pick))
    boots.sort()
    interval = [boots[int(0.025 * len(boots))], boots[int(0.975 * len(boots)) - 1]] if boots else [value, value]
    n_rep = len(rows[0][num[0]][num[1]])
    per_pass = [sum(r[num[0]][num[1]][k] for r in rows) / sum(r[den[0]][den[1]][k] for r in rows) for k in range(n_rep)]
    return {"value": value, "interval": interval, "repeat_range": [min(per_pass), max(per_pass)]}


def ratio_text(stats: dict, unit: str = "x") -> str:
    lo, hi = stats["interval"]
    rlo, rhi = stats["repeat_range"]
    return (f"{stats['value']:.2f}{unit} (95% over pages {lo:.2f}-{hi:.2f}; passes {rlo:.2f}-{rhi:.2f})")


def run_bench(model: str = "nano", n_pages: int = FULL["n_pages"], repeats: int = FULL["repeats"], ar_model: str | None = None,
              params: DecodeParams | None = None, decoders=DECODERS, log=print) -> dict:
    """The benchmark: one run, same pages, warm, medians over repeats, in two regimes.

    ``page_batch``: every region of a page decodes as one batch (what the app does with the nano
    models). ``one_region_at_a_time``: a batch of one (what the real model does, and what the
    paper's tokens/s measure). ``speedup_vs_ar`` is the latter; both are reported. Every ratio
    comes with its spread (:func:`ratio_stats`). ``params``: the decode settings (default: the
    release's, deterministic); every decoder reads the knobs it uses. ``decoders``: which to time
    (AR and diffusion always; the draft-and-verify ones by default too).
    """
    decoders = tuple(dict.fromkeys(("diffusion", "ar", *decoders)))
    pages = bench_pages(n_pages)
    ar_model = ar_model or model
    params = params or DecodeParams()
    variants = bench_variants(decoders, model, ar_model, params)
    for sequential in (False, True):  # warm-up: load models, allocator, caches
        for d in decoders:
            decoder, spec, p = variants[d]
            _decode(pages[0], spec, decoder, p, sequential)
    regimes = {name: _regime(pages, variants, repeats, seq, log=log, name=name) for name, seq in REGIMES.items()}

    def total(rows, key, m):
        return sum(statistics.median(r[key][m]) for r in rows)

    summary = {}
    for name, rows in regimes.items():
        ratios = {"speedup_vs_ar": ratio_stats(rows, ("ar", "decode_s"), ("diffusion", "decode_s")),
                  "speedup_vs_ar_wall": ratio_stats(rows, ("ar", "wall_s"), ("diffusion", "wall_s")),
                  "recording_overhead": ratio_stats(rows, ("diffusion", "wall_s"), (norec("diffusion"), "wall_s")),
                  "recording_overhead_ar": ratio_stats(rows, ("ar", "wall_s"), (norec("ar"), "wall_s"))}
        per_decoder = {}
        for d in decoders:
            tokens = sum(r[d]["tokens"] for r in rows)
            entry = {"tokens_per_forward": tokens / sum(r[d]["nfe"] for r in rows), "cer": _micro_cer(rows, d),
                     "decode_s_per_page": total(rows, d, "decode_s") / n_pages,
                     "wall_s_per_page": total(rows, d, "wall_s") / n_pages,
                     "prefill_s_per_page": total(rows, d, "prefill_s") / n_pages,
                     "pages_per_second": n_pages / total(rows, d, "wall_s"),
                     "trace_bytes_per_token": sum(r[d]["trace_bytes"] for r in rows) / tokens,
                     "tokens_equal_ar": all(r[d]["tokens_equal_ar"] for r in rows)}
            if d != "ar":
                entry["speedup_vs_ar"] = ratio_stats(rows, ("ar", "decode_s"), (d, "decode_s"))
                entry["speedup_vs_ar_wall"] = ratio_stats(rows, ("ar", "wall_s"), (d, "wall_s"))
            if norec(d) in variants:
                entry["recording_overhead"] = ratio_stats(rows, (d, "wall_s"), (norec(d), "wall_s"))
            # the recorder's own time inside the recorded runs: immune to the machine's speed drifting
            # between the recorded and unrecorded runs, which the on/off ratio is not
            entry["recording_share"] = total(rows, d, "recording_s") / max(1e-9, total(rows, d, "wall_s"))
            if "verify_forwards" in rows[0][d]:
                verify = sum(r[d]["verify_forwards"] for r in rows)
                drafted = sum(r[d]["drafted"] for r in rows)
                entry.update(tokens_per_verify_forward=tokens / max(1, verify),
                             acceptance=sum(r[d]["accepted"] for r in rows) / max(1, drafted))
            per_decoder[d] = entry
        summary[name] = {
            "tokens_per_forward": {d: e["tokens_per_forward"] for d, e in per_decoder.items()},
            **{k: v["value"] for k, v in ratios.items()},
            "ratios": ratios,
            "decoders": per_decoder,
            "prefill_s_per_page": {d: e["prefill_s_per_page"] for d, e in per_decoder.items()},
            "trace_bytes_per_token": per_decoder["diffusion"]["trace_bytes_per_token"],
            "cer": {d: e["cer"] for d, e in per_decoder.items()},
            "decode_s_per_page": {d: e["decode_s_per_page"] for d, e in per_decoder.items()},
            "wall_s_per_page": {d: e["wall_s_per_page"] for d, e in per_decoder.items()},
            "pages_per_second": {d: e["pages_per_second"] for d, e in per_decoder.items()},
            "per_page": rows,
        }
    head, batch = summary["one_region_at_a_time"], summary["page_batch"]
    spreads = {"speedup_vs_ar": head["ratios"]["speedup_vs_ar"],
               "speedup_vs_ar_page_batch": batch["ratios"]["speedup_vs_ar"],
               "recording_overhead": batch["ratios"]["recording_overhead"],
               "recording_overhead_one_region": head["ratios"]["recording_overhead"]}
    for d in decoders:  # the draft-and-verify decoders, same names with the decoder's in front
        if d in ("ar", "diffusion"):
            continue
        key = d.replace("-", "_")
        spreads[f"{key}_speedup_vs_ar"] = head["decoders"][d]["speedup_vs_ar"]
        spreads[f"{key}_speedup_vs_ar_page_batch"] = batch["decoders"][d]["speedup_vs_ar"]
        if norec(d) in variants:
            spreads[f"{key}_recording_overhead"] = batch["decoders"][d]["recording_overhead"]
            spreads[f"{key}_recording_overhead_one_region"] = head["decoders"][d]["recording_overhead"]
    return {
        "model": model,
        "ar_model": ar_model,
        "pages": n_pages,
        "repeats": repeats,
        "decoders": list(decoders),
        "settings": params.knobs(),
        "tokens_per_forward": head["tokens_per_forward"],
        "tokens_per_verify_forward": {d: e["tokens_per_verify_forward"] for d, e in head["decoders"].items()
                                      if "tokens_per_verify_forward" in e},
        "tokens_equal_ar": {d: head["decoders"][d]["tokens_equal_ar"] and batch["decoders"][d]["tokens_equal_ar"]
                            for d in decoders},
        "speedup_vs_ar": head["speedup_vs_ar"],
        "speedup_vs_ar_page_batch": batch["speedup_vs_ar"],
        "recording_overhead": batch["recording_overhead"],
        "recording_overhead_one_region": head["recording_overhead"],
        "recording_share": {regime: {d: e["recording_share"] for d, e in summary[regime]["decoders"].items()}
                            for regime in summary},
        "spreads": spreads,
        "first_frame": first_frame(pages, model, params),
        "trace_bytes_per_token": batch["trace_bytes_per_token"],
        "peak_rss_mb": _peak_rss_mb(),
        "cer": batch["cer"],
        "decode_s_per_page": batch["decode_s_per_page"],
        "pages_per_second": batch["pages_per_second"],
        "regimes": summary,
    }


def first_frame(pages: list[Page], model: str, params) -> dict:
    """How soon a streamed view gets its first frame: seconds from the end of the prefill to the
    first snapshot of the trace (the app's player shows it), per page, page-batch regime."""
    after = []
    for page in pages:
        marks: dict = {}
        t0 = time.perf_counter()

        def snap(make, marks=marks):
            if "first" not in marks:
                make()  # what the app pays to build the frame
                marks["first"] = time.perf_counter() - t0

        trace = decode_page(page, model=model, decoder="diffusion", params=params, snapshot=snap)
        after.append(marks.get("first", trace.metrics.wall_s) - trace.metrics.prefill_s)
    return {"after_prefill_s": [round(a, 4) for a in after], "max_after_prefill_s": round(max(after), 4),
            "median_after_prefill_s": round(statistics.median(after), 4)}


def _micro_cer(rows: list[dict], key: str) -> float | None:
    vals = [(r[key]["cer"], r["chars"]) for r in rows if r[key]["cer"] is not None]
    if not vals:
        return None
    return sum(c * n for c, n in vals) / sum(n for _, n in vals)


def run_sweep(model: str = "nano", ar_model: str | None = None, n_pages: int = 4,
              thresholds=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99), block_lengths=(8, 16, 32), log=print) -> dict:
    """Accuracy-speed curve: one point per (block length, threshold), AR as the reference point."""
    pages = bench_pages(n_pages)  # the benchmark's pages, so the two reports agree
    ar_model = ar_model or model
    _decode(pages[0], model, "diffusion", DecodeParams())
    points = []

    def measure(decoder: str, params, spec: str) -> dict:
        edits = chars = tokens = nfe = 0
        decode_s = 0.0
        for page in pages:
            t = _decode(page, spec, decoder, params)
            ref = page.text or ""
            edits += round(cer(t.text, ref) * len(ref))
            chars += len(ref)
            tokens += t.metrics.tokens
            nfe += t.metrics.nfe
            decode_s += t.metrics.decode_s
        return {"cer": edits / max(1, chars), "tokens_per_forward": tokens / max(1, nfe),
                "tokens_per_second": tokens / max(1e-9, decode_s), "decode_s": decode_s, "tokens": tokens}

    ar_point = {"decoder": "ar", **measure("ar", DecodeParams(), ar_model)}
    log(f"AR: {json.dumps(ar_point)}")
    for bl in block_lengths:
        for thr in thresholds:
            p = {"decoder": "diffusion", "block_length": bl, "threshold": thr,
                 **measure("diffusion", DecodeParams(block_length=bl, steps=bl, threshold=thr), model)}
            p["speed_vs_ar"] = p["tokens_per_second"] / ar_point["tokens_per_second"]
            points.append(p)
            log(f"block {bl} threshold {thr}: {json.dumps(p)}")
    return {"model": model, "pages": n_pages, "ar": ar_point, "points": points}


def sweep_figure(sweep: dict):
    """Plotly figure of the curve: CER vs tokens per second, one line per block length."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for bl in sorted({p["block_length"] for p in sweep["points"]}):
        pts = [p for p in sweep["points"] if p["block_length"] == bl]
        fig.add_trace(go.Scatter(
            x=[p["tokens_per_second"] for p in pts], y=[100 * p["cer"] for p in pts], mode="lines+markers",
            name=f"diffusion, block {bl}", text=[f"threshold {p['threshold']}<br>{p['tokens_per_forward']:.2f} tokens/forward" for p in pts],
            hovertemplate="%{text}<br>%{x:.0f} tokens/s<br>CER %{y:.2f}%<extra></extra>"))
    ar = sweep["ar"]
    fig.add_trace(go.Scatter(x=[ar["tokens_per_second"]], y=[100 * ar["cer"]], mode="markers", name="AR (greedy)",
                             marker={"symbol": "star", "size": 14}))
    fig.update_layout(title="Accuracy vs speed (nano pair, held-out pages)", xaxis_title="decoded tokens per second",
                      yaxis_title="page CER (%)", template="plotly_white")
    return fig


def sweep_table(sweep: dict) -> str:
    lines = ["| decoder | block | threshold | CER % | tokens/forward | tokens/s | vs AR |", "|---|---|---|---|---|---|---|"]
    ar = sweep["ar"]
    lines.append(f"| AR | - | - | {100 * ar['cer']:.2f} | {ar['tokens_per_forward']:.2f} | {ar['tokens_per_second']:.0f} | 1.00x |")
    for p in sweep["points"]:
        lines.append(f"| diffusion | {p['block_length']} | {p['threshold']} | {100 * p['cer']:.2f} | "
                     f"{p['tokens_per_forward']:.2f} | {p['tokens_per_second']:.0f} | {p['speed_vs_ar']:.2f}x |")
    return "\n".join(lines) + "\n"


def run_draft_sweep(model: str = "nano", ar_model: str | None = None, n_pages: int = 4, draft_lengths=(2, 4, 8, 16),
                    decoders=("self-speculative", "speculative"), one_region_at_a_time: bool = False, log=print,
                    branches: tuple[str, ...] | None = None, floors: tuple[float, ...] | None = None,
                    params: DecodeParams | None = None) -> dict:
    """The draft length's curve: per decoder and draft length, tokens per forward (every forward of
    every model), tokens per verify forward, acceptance, CER and decode time, beside the reference
    decodes they must equal token for token (the diffusion model's block-length-1 decode for
    ``self-speculative``, AR for ``speculative``), on the benchmark's pages. ``branches`` and
    ``floors`` (default: the knobs' defaults) make the self-speculative points a grid over the
    ``draft_branches`` and ``draft_floor`` knobs as well. ``params``: the other settings (default: ours)."""
    pages = bench_pages(n_pages)
    ar_model = ar_model or model
    base = params or DecodeParams()

    def ids(trace) -> list[list[int]]:
        return [[t.id for t in r.tokens] for r in trace.regions]

    def measure(decoder: str, spec: str, params) -> dict:
        runs = [_decode(page, spec, decoder, params, one_region_at_a_time) for page in pages]
        edits = chars = 0
        for page, t in zip(pages, runs):
            ref = page.text or ""
            edits += round(cer(t.text, ref) * len(ref))
            chars += len(ref)
        m = [t.metrics for t in runs]
        out = {"tokens": sum(x.tokens for x in m), "nfe": sum(x.nfe for x in m), "decode_s": sum(x.decode_s for x in m),
               "cer": edits / max(1, chars), "ids": [ids(t) for t in runs]}
        out["tokens_per_forward"] = out["tokens"] / max(1, out["nfe"])
        if "draft_branches" in runs[0].params:  # what ran ("auto" resolved to the model's own)
            out["draft_branches"] = runs[0].params["draft_branches"]
        if m[0].get("verify_forwards") is not None:
            out["tokens_per_verify_forward"] = out["tokens"] / max(1, sum(x.verify_forwards for x in m))
            out["acceptance"] = sum(x.accepted for x in m) / max(1, sum(x.drafted for x in m))
        return out

    _decode(pages[0], model, "diffusion", replace(base, block_length=1, steps=1), one_region_at_a_time)  # warm-up
    refs = {"self-speculative": measure("diffusion", model, replace(base, block_length=1, steps=1)),
            "speculative": measure("ar", ar_model, base)}
    for name, r in refs.items():
        log(f"reference of {name}: tpf {r['tokens_per_forward']:.2f}, CER {100 * r['cer']:.2f}%, decode {r['decode_s']:.2f}s")
    points = []
    grid = [{"draft_branches": b, "draft_floor": f} for b in (branches or (base.draft_branches,))
            for f in (floors or (base.draft_floor,))]
    for decoder in decoders:
        for w in draft_lengths:
            for variant in (grid if decoder == "self-speculative" else [{}]):
                knobs = {"draft_length": w, **variant, **({"verifier": ar_model} if decoder == "speculative" else {})}
                p = measure(decoder, model, replace(base, more={**base.more, **knobs}))
                ref = refs[decoder]
                point = {"decoder": decoder, "draft_length": w, **variant, "equal_to_reference": p.pop("ids") == ref["ids"],
                         "speedup_vs_reference": ref["decode_s"] / max(1e-9, p["decode_s"]), **p}
                points.append(point)
                log(f"{decoder} draft {w}: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in point.items()}))
    for r in refs.values():
        r.pop("ids")
    return {"model": model, "ar_model": ar_model, "pages": n_pages, "one_region_at_a_time": one_region_at_a_time,
            "references": {"self-speculative": {"decoder": "diffusion --block-length 1", **refs["self-speculative"]},
                           "speculative": {"decoder": "ar", **refs["speculative"]}},
            "points": points}


def draft_sweep_table(sweep: dict) -> str:
    lines = ["| decoder | draft length | branches | floor | tokens/forward | tokens/verify forward | acceptance | CER % | decode time vs reference | equal to reference |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in sweep["references"].items():
        lines.append(f"| reference of {name}: {r['decoder']} | - | - | - | {r['tokens_per_forward']:.2f} | - | - | {100 * r['cer']:.2f} | 1.00x | - |")
    for p in sweep["points"]:
        lines.append(f"| {p['decoder']} | {p['draft_length']} | {p.get('draft_branches', '-')} | {p.get('draft_floor', '-')} | "
                     f"{p['tokens_per_forward']:.2f} | "
                     f"{p.get('tokens_per_verify_forward', 0):.2f} | {p.get('acceptance', 0):.3f} | {100 * p['cer']:.2f} | "
                     f"{p['speedup_vs_reference']:.2f}x faster | {'yes' if p['equal_to_reference'] else 'NO'} |")
    return "\n".join(lines) + "\n"
