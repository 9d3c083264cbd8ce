"""One-click setups on the Decode tab: a decoder and a few knobs, each saying what it changes and why.

A visitor should not need the Advanced settings to see what the knobs do: "Watch the order" makes
the decoding order the whole show, "Fewest forwards" trades reading for speed, "Reads best" picks the
decoder that reads as well as AR. Each button sets only the knobs it names; the others stay.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import gradio as gr

from mudiff_viz.decoding.settings import KNOB


@dataclass(frozen=True)
class Setup:
    key: str
    label: str
    decoder: str
    knobs: dict = field(default_factory=dict)
    says: str = ""  # what it changes and why, shown under the buttons once clicked


SETUPS = (
    Setup("order", "Watch the order", "diffusion",
          {"block_length": 32, "steps": 32, "strategy": "low_confidence_static"},
          "Diffusion with a fixed quota of one token per line per forward (block 32, 32 steps, low_confidence_static): "
          "which position the model unmasks next is all that changes from frame to frame."),
    Setup("fast", "Fewest forwards", "diffusion",
          {"block_length": 32, "steps": 32, "strategy": "low_confidence_dynamic", "threshold": 0.7},
          "Diffusion committing every guess above 0.7 (low_confidence_dynamic): fewer forward passes per block, "
          "and more misreads on the subword pair."),
    Setup("reads", "Reads best", "self-speculative", {"draft_length": 0},
          "Self-speculative: the diffusion model drafts ahead and keeps only what its own one-token reads confirm, "
          "so it reads as well as decoding one token at a time (draft length: the model's own)."),
)


def setup_row(prefix: str) -> list[tuple[Setup, gr.Button]]:
    """The buttons, in a row with a one-line note (filled when one is clicked)."""
    with gr.Row(elem_id=f"{prefix}-setups", equal_height=True):
        buttons = [(s, gr.Button(f"Setup: {s.label}", size="sm", elem_id=f"{prefix}-setup-{s.key}", scale=0,
                                 min_width=180)) for s in SETUPS]
    note = gr.Markdown("", elem_classes="mudiff-note", elem_id=f"{prefix}-setup-note")
    return [(s, b, note) for s, b in buttons]


def setup_values(setup: Setup, names: tuple[str, ...]) -> list:
    """The decoder, each shown knob (gr.skip() where the setup leaves it) and the note, in output order."""
    unknown = set(setup.knobs) - set(KNOB)
    if unknown:
        raise ValueError(f"setup {setup.key!r} sets unknown knobs {sorted(unknown)}")
    knobs = [setup.knobs[n] if n in setup.knobs else gr.skip() for n in names]
    return [setup.decoder, *knobs, f"**{setup.label}:** {setup.says}"]


def wire(buttons: list, knobs, decoder: gr.Radio) -> None:
    names = knobs.names()
    for setup, button, note in buttons:
        button.click(functools.partial(setup_values, setup, names), None, [decoder, *knobs.values(names), note],
                     queue=False, api_visibility="private")
