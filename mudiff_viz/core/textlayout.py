"""Text layout of the synthetic pages (paragraphs merged, lines broken), shared by the PDF page
maker (``inputs.synth``) and the GPU training kit's page composer (``nano_training.gpu_data``),
which runs where PyMuPDF is not installed: so it lives here, importing nothing."""

from __future__ import annotations

import random
from typing import Callable


def merge_paragraphs(pars: list[str], rng: random.Random, lengths: tuple[float, float] = (250.0, 700.0)) -> list[str]:
    """Join consecutive short paragraphs (docstrings are often one sentence) into paragraphs of a
    few lines, so pages have text blocks of several lines as real documents do."""
    out: list[str] = []
    current, goal = "", rng.uniform(*lengths)
    for par in pars:
        current = f"{current} {par}" if current else par
        if len(current) >= goal:
            out.append(current)
            current, goal = "", rng.uniform(*lengths)
    if current:
        out.append(current)
    return out


def wrap(words: list[str], width: float, measure: Callable[[str], float]) -> list[str]:
    """Lines of at most ``width`` by ``measure``; words longer than a line are split by characters."""
    lines: list[str] = []
    line = ""
    for word in words:
        while measure(word) > width:  # hard-break very long words
            cut = max(1, int(len(word) * width / measure(word)) - 1)
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:cut])
            word = word[cut:]
        candidate = f"{line} {word}" if line else word
        if measure(candidate) <= width:
            line = candidate
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines
