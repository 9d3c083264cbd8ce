"""Benchmarks: ``python -m mudiff_viz bench`` and ``python -m mudiff_viz sweep``.

Every ratio is measured in ONE run on the same pages, warm, as medians over repeats, so machine
speed cancels out: diffusion vs AR decode time (prefill excluded and reported separately), recording
on vs off. Nothing here asserts timings; the numbers go to JSON and docs/benchmarks.md.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
from dataclasses import replace

from mudiff_viz.core.metrics import cer
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
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _decode(page: Page, model: str, decoder: str, params, one_region_at_a_time: bool = False):
    """One decode; ``one_region_at_a_time``: the latency regime (a batch of one region, as the real
    model runs) instead of the page batch."""
    return decode_page(page, model=model, decoder=decoder, params=params, batch_regions=not one_region_at_a_time)


REGIMES = {"page_batch": False, "one_region_at_a_time": True}


def _regime(pages, model, ar_model, diff, ar, repeats, sequential, record_off: bool, log, name):
    """Per-page medians for diffusion and AR (and their recording-off twins) in one regime."""
    diff_off, ar_off = replace(diff, record=False), replace(ar, record=False)
    per_page = []
    for i, page in enumerate(pages):
        runs: dict[str, list] = {"diffusion": [], "ar": []}
        if record_off:
            runs.update({"diffusion_norec": [], "ar_norec": []})
        for _ in range(repeats):
            # interleaved so drift in machine speed hits every variant alike
            runs["diffusion"].append(_decode(page, model, "diffusion", diff, sequential))
            runs["ar"].append(_decode(page, ar_model, "ar", ar, sequential))
            if record_off:
                runs["diffusion_norec"].append(_decode(page, model, "diffusion", diff_off, sequential))
                runs["ar_norec"].append(_decode(page, ar_model, "ar", ar_off, sequential))
        med = {k: {m: statistics.median(t.metrics[m] for t in v) for m in ("wall_s", "prefill_s", "decode_s")}
               for k, v in runs.items()}
        d, a = runs["diffusion"][0], runs["ar"][0]
        row = {
            "page": i,
            "chars": len(page.text or ""),
            "regions": len(d.regions),
            "diffusion": {**med["diffusion"], "tokens": d.metrics["tokens"], "nfe": d.metrics["nfe"],
                          "tokens_per_forward": d.metrics["tokens_per_forward"], "cer": d.metrics.get("cer"),
                          "trace_bytes": len(d.to_json().encode())},
            "ar": {**med["ar"], "tokens": a.metrics["tokens"], "nfe": a.metrics["nfe"],
                   "tokens_per_forward": a.metrics["tokens_per_forward"], "cer": a.metrics.get("cer")},
        }
        if record_off:
            row["diffusion_norec"], row["ar_norec"] = med["diffusion_norec"], med["ar_norec"]
        per_page.append(row)
        log(f"[{name}] page {i}: diffusion decode {row['diffusion']['decode_s']:.2f}s "
            f"(tpf {row['diffusion']['tokens_per_forward']:.2f}, CER {100 * (row['diffusion']['cer'] or 0):.2f}%), "
            f"AR decode {row['ar']['decode_s']:.2f}s (CER {100 * (row['ar']['cer'] or 0):.2f}%)")
    return per_page


def run_bench(model: str = "nano", n_pages: int = 6, repeats: int = 3, ar_model: str | None = None,
              block_length: int = 32, threshold: float = 0.95, log=print) -> dict:
    """The benchmark: one run, same pages, warm, medians over repeats, in two regimes.

    ``page_batch``: every region of a page decodes as one batch (what the app does with the nano
    models). ``one_region_at_a_time``: a batch of one (what the real model does, and what the
    paper's tokens/s measure). ``speedup_vs_ar`` is the latter; both are reported.
    """
    pages = bench_pages(n_pages)
    ar_model = ar_model or model
    diff = DecodeParams(block_length=block_length, steps=block_length, threshold=threshold, max_new_tokens=1024)
    ar = DecodeParams(max_new_tokens=1024)
    for sequential in (False, True):  # warm-up: load models, allocator, caches
        _decode(pages[0], model, "diffusion", diff, sequential)
        _decode(pages[0], ar_model, "ar", ar, sequential)
    regimes = {name: _regime(pages, model, ar_model, diff, ar, repeats, seq, record_off=True, log=log, name=name)
               for name, seq in REGIMES.items()}

    def total(rows, key, m):
        return sum(r[key][m] for r in rows)

    summary = {}
    for name, rows in regimes.items():
        d_tokens = sum(r["diffusion"]["tokens"] for r in rows)
        summary[name] = {
            "tokens_per_forward": {
                "diffusion": d_tokens / sum(r["diffusion"]["nfe"] for r in rows),
                "ar": sum(r["ar"]["tokens"] for r in rows) / sum(r["ar"]["nfe"] for r in rows),
            },
            "speedup_vs_ar": total(rows, "ar", "decode_s") / total(rows, "diffusion", "decode_s"),
            "speedup_vs_ar_wall": total(rows, "ar", "wall_s") / total(rows, "diffusion", "wall_s"),
            "prefill_s_per_page": {"diffusion": total(rows, "diffusion", "prefill_s") / n_pages,
                                   "ar": total(rows, "ar", "prefill_s") / n_pages},
            "recording_overhead": total(rows, "diffusion", "wall_s") / total(rows, "diffusion_norec", "wall_s"),
            "recording_overhead_ar": total(rows, "ar", "wall_s") / total(rows, "ar_norec", "wall_s"),
            "trace_bytes_per_token": sum(r["diffusion"]["trace_bytes"] for r in rows) / d_tokens,
            "cer": {"diffusion": _micro_cer(rows, "diffusion"), "ar": _micro_cer(rows, "ar")},
            "decode_s_per_page": {"diffusion": total(rows, "diffusion", "decode_s") / n_pages,
                                  "ar": total(rows, "ar", "decode_s") / n_pages},
            "wall_s_per_page": {"diffusion": total(rows, "diffusion", "wall_s") / n_pages,
                                "ar": total(rows, "ar", "wall_s") / n_pages},
            "pages_per_second": {"diffusion": n_pages / total(rows, "diffusion", "wall_s"),
                                 "ar": n_pages / total(rows, "ar", "wall_s")},
            "per_page": rows,
        }
    head, batch = summary["one_region_at_a_time"], summary["page_batch"]
    return {
        "model": model,
        "ar_model": ar_model,
        "pages": n_pages,
        "repeats": repeats,
        "settings": {"block_length": block_length, "steps": block_length, "threshold": threshold, "temperature": 0.0},
        "tokens_per_forward": head["tokens_per_forward"],
        "speedup_vs_ar": head["speedup_vs_ar"],
        "speedup_vs_ar_page_batch": batch["speedup_vs_ar"],
        "recording_overhead": batch["recording_overhead"],
        "recording_overhead_one_region": head["recording_overhead"],
        "trace_bytes_per_token": batch["trace_bytes_per_token"],
        "peak_rss_mb": _peak_rss_mb(),
        "cer": batch["cer"],
        "decode_s_per_page": batch["decode_s_per_page"],
        "pages_per_second": batch["pages_per_second"],
        "regimes": summary,
    }


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
            tokens += t.metrics["tokens"]
            nfe += t.metrics["nfe"]
            decode_s += t.metrics["decode_s"]
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
