"""How the views name and colour decoders (one place: the player, figures, tables and reports agree)."""

from __future__ import annotations

from mudiff_viz.views.palette import DECODER_COLOURS, decoder_colour  # noqa: F401  (the one palette)


def decoder_label(decoder: str) -> str:
    """'AR' for the autoregressive decoder, else the decoder's registered name."""
    return "AR" if decoder == "ar" else decoder


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """'1 word', '2 words', '1 forward pass' (``plural`` when adding an s is wrong)."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


NUMBER_WORDS = tuple("zero one two three four five six seven eight nine ten eleven twelve".split())  # counts said in words


def cer_percent(value: float | None) -> str:
    """A CER (a fraction) as every view shows it: a percentage with two decimals ("–" when there is none)."""
    return "–" if value is None else f"{100 * value:.2f}%"
