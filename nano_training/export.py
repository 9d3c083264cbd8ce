"""Copy a trained nano twin into assets/models as the app ships it: fp16 safetensors, config.json
and tokenizer.json, nothing else (no optimiser state, no logs).

    python -m nano_training.export runs/nano-ar assets/models/nano-subword-ar
    python -m nano_training.export runs/nano-diffusion-sfx assets/models/nano-subword-diffusion
    python -m nano_training.export runs/char-b1 assets/models/nano-char-diffusion   # the character pair

A folder without tokenizer.json is the character pair's (its alphabet is fixed, models/nano_char).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from models.nano.weights import load_model, save_model
from models.nano_char import weights as char_weights


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a training output folder (model.safetensors, config.json, tokenizer.json)")
    ap.add_argument("out_dir", type=Path)
    args = ap.parse_args(argv)
    if (args.run_dir / "tokenizer.json").is_file():
        model, _ = load_model(args.run_dir)
        save_model(model, args.out_dir, args.run_dir / "tokenizer.json", dtype=torch.float16)
    else:
        model = char_weights.load_model(args.run_dir)
        char_weights.save_model(model, args.out_dir, dtype=torch.float16)
    size = (args.out_dir / "model.safetensors").stat().st_size
    print(f"wrote {args.out_dir}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, "
          f"{size / 1e6:.1f} MB fp16")


if __name__ == "__main__":
    main()
