"""Greedy line breaking, shared by the PDF page maker (``inputs.synth``) and the GPU training kit's
page composer (``nano_training.gpu_data``), which runs where PyMuPDF is not installed: so it
lives here, importing nothing."""

from __future__ import annotations

from typing import Callable


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
