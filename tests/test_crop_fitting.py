"""Crop fitting of the MinerU two-stage parse, in the release's order: pad thin crops, then upscale.

The expected sizes are worked out by hand from the rule in docs/real-models.md#crop-fitting:
1. if long / short > 50: pad the short edge to ceil(long / 50) (white, centred);
2. then if the short edge < 28: scale both edges by 28 / short, rounding each.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from models.mineru_common.imaging import fit_edges

CASES = [  # (w, h) in -> (w, h) out
    ((10, 600), (28, 1400)),  # pad to 12 x 600, then x 28/12 (upscaling first would give 34 x 1680)
    ((600, 10), (1400, 28)),
    ((5, 300), (28, 1400)),  # pad to 6 x 300, then x 28/6
    ((30, 2000), (40, 2000)),  # pad to 40 x 2000: already >= 28, no upscale
    ((20, 100), (28, 140)),  # 1:5 is fine: only the upscale
    ((3, 100), (28, 933)),  # 1:33: upscale x 28/3, 933.3 rounds to 933
    ((27, 27), (28, 28)),
    ((100, 50), (100, 50)),  # nothing to do
    ((28, 1400), (28, 1400)),  # exactly 50:1 is allowed
]


@pytest.mark.parametrize("size, expected", CASES)
def test_fit_edges_table(size, expected):
    assert fit_edges(Image.new("RGB", size, (0, 0, 0))).size == expected


def test_padding_is_white_and_centred_before_the_upscale():
    out = fit_edges(Image.new("RGB", (10, 600), (0, 0, 0)))  # black strip -> 12 x 600 -> 28 x 1400
    row = np.asarray(out.convert("L"))[700]
    assert row[0] > 200 and row[-1] > 200  # white margins on both sides
    assert row[14] < 50  # the strip stays in the middle
