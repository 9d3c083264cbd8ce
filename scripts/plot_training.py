"""Loss curves of the nano training runs -> docs/figures/nano-training.png (plotly + kaleido).

    python scripts/plot_training.py docs/training/*.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

ROOT = Path(__file__).resolve().parent.parent


def main(paths: list[str]) -> None:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("decoder loss (train)", "held-out lines (eval)"))
    offset = 0
    for path in paths:
        rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
        name = Path(path).stem
        train = [r for r in rows if "ce" in r and "eval" not in r]
        evals = [r for r in rows if "eval" in r]
        start = offset if "diffusion" in name else 0
        fig.add_trace(go.Scatter(x=[start + r["step"] for r in train], y=[r["ce"] for r in train], name=f"{name} CE",
                                 mode="lines"), row=1, col=1)
        fig.add_trace(go.Scatter(x=[start + r["step"] for r in evals], y=[r["eval"]["val_ce"] for r in evals],
                                 name=f"{name} val CE", mode="lines+markers"), row=1, col=2)
        fig.add_trace(go.Scatter(x=[start + r["step"] for r in evals], y=[r["eval"]["ctc_cer"] for r in evals],
                                 name=f"{name} CTC CER", mode="lines+markers", line={"dash": "dot"}), row=1, col=2)
        if "diffusion" not in name:
            offset = max([r["step"] for r in rows if "step" in r] + [offset])
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_xaxes(title_text="training step (diffusion continues from the AR twin)")
    fig.update_layout(width=1200, height=420, template="plotly_white", legend={"font": {"size": 10}})
    out = ROOT / "docs" / "figures" / "nano-training.png"
    fig.write_image(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
