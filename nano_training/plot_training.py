"""Loss curves of the nano training runs -> docs/figures/nano-training.png (plotly + kaleido).

    python -m nano_training.plot_training [--out PNG] RUN.jsonl:OFFSET ...

The character pair's figure (the default --out):
    python -m nano_training.plot_training docs/results/training/ar-run1-plain-positions.jsonl:0 \
        docs/results/training/ar-run2-ctc-positions.jsonl:1000 docs/results/training/diffusion.jsonl:1500
The subword pair's:
    python -m nano_training.plot_training --out docs/figures/nano-subword-training.png docs/results/training/subword-ar.jsonl:0 \
        docs/results/training/subword-diffusion-uniform.jsonl:3000 docs/results/training/subword-diffusion-suffix.jsonl:4400

OFFSET places a run on one step axis by its lineage: the second AR run started from the first
run's step-1000 weights (offset 1000), the diffusion twin from the second AR run's step 500
(offset 1500).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

ROOT = Path(__file__).resolve().parent.parent


def smooth(values: list[float], k: int = 4) -> list[float]:
    return [sum(values[max(0, i - k + 1) : i + 1]) / len(values[max(0, i - k + 1) : i + 1]) for i in range(len(values))]


def main(specs: list[str]) -> None:
    out = ROOT / "docs" / "figures" / "nano-training.png"
    if specs and specs[0] == "--out":
        out, specs = Path(specs[1]), specs[2:]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("decoder loss, train (moving average of 4 logs)",
                                                        "held-out lines: decoder CE and CTC CER"))
    palette = ["#636efa", "#ef553b", "#00a86b"]
    for n, spec in enumerate(specs):
        path, _, offset = spec.partition(":")
        offset = int(offset or 0)
        rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
        name = Path(path).stem
        color = palette[n % len(palette)]
        train = [r for r in rows if "ce" in r and "eval" not in r]
        evals = [r for r in rows if "eval" in r]
        fig.add_trace(go.Scatter(x=[offset + r["step"] for r in train], y=smooth([r["ce"] for r in train]),
                                 name=f"{name}: train CE", mode="lines", line={"color": color}), row=1, col=1)
        fig.add_trace(go.Scatter(x=[offset + r["step"] for r in evals], y=[r["eval"]["val_ce"] for r in evals],
                                 name=f"{name}: held-out CE", mode="lines+markers", line={"color": color}), row=1, col=2)
        fig.add_trace(go.Scatter(x=[offset + r["step"] for r in evals], y=[r["eval"]["ctc_cer"] for r in evals],
                                 name=f"{name}: CTC CER", mode="lines", line={"color": color, "dash": "dot"}), row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_xaxes(title_text="training step (runs placed by the weights they started from)")
    fig.update_layout(width=1250, height=430, template="plotly_white", legend={"font": {"size": 10}})
    fig.write_image(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
