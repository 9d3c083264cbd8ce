"""The Gradio app (placeholder until the player lands): decode a bundled sample, show the text."""

from __future__ import annotations

import os
from pathlib import Path

import gradio as gr

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "assets" / "samples"


def sample_paths() -> list[str]:
    return sorted(str(p) for p in SAMPLES.glob("*") if p.suffix.lower() in (".pdf", ".png", ".jpg", ".jpeg"))


def run_decode(path: str | None, decoder: str) -> tuple[str, str]:
    from mudiff_viz.cli import summary_line
    from mudiff_viz.errors import ModelLoadError, UserInputError
    from mudiff_viz.pages import load_page
    from mudiff_viz.pipeline import decode_page

    if not path:
        raise gr.Error("Choose a page first.")
    try:
        trace = decode_page(load_page(path), decoder=decoder)
    except (UserInputError, ModelLoadError) as exc:
        raise gr.Error(str(exc)) from None
    return trace.text, summary_line(trace)


def build_app() -> gr.Blocks:
    samples = sample_paths()
    with gr.Blocks(title="mudiff-viz") as demo:
        gr.Markdown("# mudiff-viz\nDiffusion OCR decoding, step by step.")
        page = gr.File(label="Page (PNG, JPEG or PDF)", value=samples[0] if samples else None, elem_id="decode-input")
        decoder = gr.Radio(["diffusion", "ar"], value="diffusion", label="Decoder")
        run = gr.Button("Run", variant="primary", elem_id="decode-run")
        text = gr.Textbox(label="Text", lines=12)
        summary = gr.Markdown()
        run.click(run_decode, [page, decoder], [text, summary], concurrency_id="model")
    return demo


def launch_kwargs() -> dict:
    return {
        "server_name": os.environ.get("MUDIFF_HOST", "127.0.0.1"),
        "server_port": int(os.environ.get("MUDIFF_PORT", "7860")),
    }
