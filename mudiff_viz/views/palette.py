"""The one palette: a colour per decoder (Okabe-Ito, safe for every common colour blindness).

Plotly figures, the player's panes and charts, the Corpus charts and the Shuffle benchmark all read
these, so a decoder is the same colour on every chart and no two decoders share one."""

from __future__ import annotations

# Okabe & Ito (2008), "Color Universal Design": eight colours told apart under protan, deutan and
# tritan vision. Black and yellow are kept for marks that are not a decoder (thresholds, cursors).
OKABE_ITO = {
    "orange": "#e69f00", "sky blue": "#56b4e9", "bluish green": "#009e73", "yellow": "#f0e442",
    "blue": "#0072b2", "vermilion": "#d55e00", "reddish purple": "#cc79a7", "black": "#000000",
}

DECODER_COLOURS = {
    "diffusion": OKABE_ITO["blue"],
    "ar": OKABE_ITO["vermilion"],
    "self-speculative": OKABE_ITO["bluish green"],
    "speculative": OKABE_ITO["reddish purple"],
}
# any further decoder: the Okabe-Ito colours no decoder above holds, in a fixed order
SPARE_COLOURS = (OKABE_ITO["orange"], OKABE_ITO["sky blue"], OKABE_ITO["black"])
REFERENCE_GREY = "#999999"  # a reference line (perfect calibration), never a decoder


def decoder_colour(decoder: str) -> str:
    """The decoder's own colour; an unknown name gets a spare one, the same on every call."""
    if decoder in DECODER_COLOURS:
        return DECODER_COLOURS[decoder]
    return SPARE_COLOURS[sum(map(ord, decoder)) % len(SPARE_COLOURS)]
