"""Occlusion and degradation results for docs/probes.md: the embedded pair on held-out synthetic pages.

    python scripts/run_probe_results.py --update-doc          # the doc's run: 12 pages x 3 seeds
    python scripts/run_probe_results.py --pages 1 --seeds 1 --out /tmp/probes-smoke   # a smoke test

Two grids through ``run_shuffle_benchmark`` (shuffle level 0): occlusion (0, 10%, 20% of the words,
each seed a different choice of words) and degradation (clean, 72 and 55 DPI, blur, noise, JPEG,
rotation; noise and JPEG differ per seed). Writes occlusion.json/.md, degradation.json/.md,
figure.html and figure.png into --out; --update-doc replaces the results block of docs/probes.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mudiff_viz.probes.bench import CLEAN, condition_markdown, run_shuffle_benchmark  # noqa: E402
from mudiff_viz.probes.perturb import parse_degrade  # noqa: E402
from scripts.run_shuffle_results import (  # noqa: E402
    files_at,
    git_commit,
    replace_marked_block,
    synthetic_pages,
    weights_id,
    write_doc_figures,
)

DOC = ROOT / "docs" / "probes.md"
BEGIN, END = "<!-- probe-results:begin -->", "<!-- probe-results:end -->"
DEGRADATIONS = ("", "dpi=72", "dpi=55", "blur=1", "noise=24", "jpeg=15", "rotate=1.5")


def figure(occ: list[dict], deg: list[dict]):
    """Two panels: what occlusion does (recovery and last-step share), and what degradation does to
    the diffusion twin's order (steps per block, first-step commits) and to CER."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from mudiff_viz.views.labels import decoder_colour, decoder_label

    fig = make_subplots(rows=1, cols=2, subplot_titles=("Occlusion: occluded words read back",
                                                        "Degradation: diffusion steps per block and CER"),
                        specs=[[{}, {"secondary_y": True}]])
    for d in ("diffusion", "ar"):
        rows = [c for c in occ if c["decoder"] == d and c["occlusion"] > 0]
        if rows:
            fig.add_trace(go.Scatter(
                x=[c["occlusion"] for c in rows], y=[c["recovery_rate"] for c in rows], mode="lines+markers",
                name=f"{decoder_label(d)}: occluded words recovered", line={"color": decoder_colour(d)},
                error_y={"type": "data", "symmetric": False,
                         "array": [c["recovery_rate_seed_range"][1] - c["recovery_rate"] for c in rows],
                         "arrayminus": [c["recovery_rate"] - c["recovery_rate_seed_range"][0] for c in rows]}), row=1, col=1)
    diff = [c for c in deg if c["decoder"] == "diffusion"]
    names = [c["degrade"] for c in diff]
    fig.add_trace(go.Bar(x=names, y=[c["steps_per_block"] for c in diff], name="diffusion steps per block",
                         marker_color="#9ecae1"), row=1, col=2, secondary_y=False)
    for d in ("diffusion", "ar"):
        rows = [c for c in deg if c["decoder"] == d]
        fig.add_trace(go.Scatter(x=[c["degrade"] for c in rows], y=[100 * c["cer"] for c in rows], mode="lines+markers",
                                 name=f"{decoder_label(d)} CER %", line={"color": decoder_colour(d)}),
                      row=1, col=2, secondary_y=True)
    fig.update_xaxes(title_text="share of words occluded", row=1, col=1)
    fig.update_yaxes(title_text="recovered", tickformat=".1%", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="steps per block", rangemode="tozero", row=1, col=2, secondary_y=False)
    fig.update_yaxes(title_text="CER %", rangemode="tozero", showgrid=False, row=1, col=2, secondary_y=True)
    fig.update_layout(template="plotly_white", height=480, legend={"orientation": "h", "y": -0.25})
    return fig


def block(meta: dict, occ_md: str, deg_md: str, at: str = "") -> str:
    """The results block; ``at``: where the result files are, relative to the Markdown file showing it."""
    return "\n".join([
        f"Run {meta['date']} at commit `{meta['commit']}`: {meta['pages']} held-out synthetic pages x {meta['seeds']} "
        f"seeds; diffusion weights `{meta['weights']['diffusion']}`, AR `{meta['weights']['ar']}`; settings: block 32, "
        f"threshold 0.95, deterministic; {meta['threads']} CPU thread(s), {meta['elapsed_min']:.1f} min. "
        "Every cell is the mean over seeds of the mean over pages, with the range of the per-seed means in brackets.",
        "", "### Occlusion", "", occ_md, "### Degradation", "", deg_md,
        f"![occlusion and degradation]({at}figure.png)", "",
        f"Interactive: [figure.html]({at}figure.html); every row: [occlusion.json]({at}occlusion.json), "
        f"[degradation.json]({at}degradation.json).",
    ])


def update_doc(text_block: str) -> None:
    replace_marked_block(DOC, BEGIN, END, text_block)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=12)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--model", default="nano", help="nano, or diffusion=SPEC,ar=SPEC")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "probes"))
    ap.add_argument("--update-doc", action="store_true", help="rewrite the results block of docs/probes.md")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pages, _ = synthetic_pages(args.pages)
    t0 = time.time()

    def log(done, total, msg):
        print(f"[{done}/{total}] {msg}", flush=True)

    knobs = {"block_length": 32, "steps": 32, "threshold": 0.95}
    occ = run_shuffle_benchmark(pages, levels=[0.0], seeds=args.seeds, model=args.model, progress=log, knobs=knobs,
                                occlusions=[0.0, 0.1, 0.2])
    degs = [parse_degrade(d) if d else {} for d in DEGRADATIONS]
    deg = run_shuffle_benchmark(pages, levels=[0.0], seeds=args.seeds, model=args.model, progress=log, knobs=knobs,
                                degradations=degs)
    for name, result in (("occlusion", occ), ("degradation", deg)):
        (out / f"{name}.json").write_text(json.dumps({"rows": result.rows, "conditions": result.conditions}, indent=1))
        (out / f"{name}.md").write_text(condition_markdown(result.conditions))
    occ_cells = [c for c in occ.conditions if c["degrade"] == CLEAN]
    write_doc_figures(figure(occ_cells, deg.conditions), out)
    meta = {"date": dt.date.today().isoformat(), "commit": git_commit(), "pages": args.pages, "seeds": args.seeds,
            "threads": args.threads, "elapsed_min": (time.time() - t0) / 60,
            "weights": {d: weights_id(args.model, d) for d in ("diffusion", "ar")}}
    tables = condition_markdown(occ.conditions), condition_markdown(deg.conditions)
    text = block(meta, *tables)
    (out / "results.md").write_text(text + "\n")
    print(text)
    if args.update_doc:
        update_doc(block(meta, *tables, at=files_at(out, DOC)))


if __name__ == "__main__":
    main()
