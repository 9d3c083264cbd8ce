"""How the views name and colour decoders (one place: the player, figures, tables and reports agree)."""

from __future__ import annotations

# Okabe-Ito: colour-blind safe
DECODER_COLOURS = {"diffusion": "#0072b2", "ar": "#d55e00"}
OTHER_COLOUR = "#555555"


def decoder_label(decoder: str) -> str:
    """'AR' for the autoregressive decoder, else the decoder's registered name."""
    return "AR" if decoder == "ar" else decoder


def decoder_colour(decoder: str) -> str:
    return DECODER_COLOURS.get(decoder, OTHER_COLOUR)


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """'1 word', '2 words', '1 forward pass' (``plural`` when adding an s is wrong)."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


NUMBER_WORDS = tuple("zero one two three four five six seven eight nine ten eleven twelve".split())  # counts said in words


def cer_percent(value: float | None) -> str:
    """A CER (a fraction) as every view shows it: a percentage with two decimals ("–" when there is none)."""
    return "–" if value is None else f"{100 * value:.2f}%"
