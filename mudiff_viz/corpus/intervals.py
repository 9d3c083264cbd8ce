"""Confidence intervals for a mean: Student's t-interval, exact for integer degrees of freedom.

No SciPy: the t distribution's CDF for integer df is a finite series (Abramowitz & Stegun 26.7.3
and 26.7.4), inverted by bisection. Used for CER over pages (corpus/stats.py, docs/corpus.md).
"""

from __future__ import annotations

import math
from statistics import mean, stdev
from typing import Sequence


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` (a positive integer) degrees of freedom."""
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    theta = math.atan(abs(t) / math.sqrt(df))
    c, s = math.cos(theta), math.sin(theta)
    if df % 2:  # odd: A = (2/pi) (theta + sin theta (cos theta + 2/3 cos^3 theta + ...))
        total, term = 0.0, c
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c * c * (2 * k) / (2 * k + 1)
        a = 2 / math.pi * (theta + s * total) if df > 1 else 2 * theta / math.pi
    else:  # even: A = sin theta (1 + 1/2 cos^2 theta + (1*3)/(2*4) cos^4 theta + ...)
        total, term = 0.0, 1.0
        for k in range(1, df // 2 + 1):
            total += term
            term *= c * c * (2 * k - 1) / (2 * k)
        a = s * total
    return 0.5 + 0.5 * a if t >= 0 else 0.5 - 0.5 * a


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t (bisection on :func:`t_cdf`, to 1e-10)."""
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def mean_interval(values: Sequence[float], level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high): mean +- t(1 - (1 - level)/2, n - 1) * s / sqrt(n); no interval under 2 values."""
    values = [float(v) for v in values]
    if not values:
        return None, None, None
    m = mean(values)
    if len(values) < 2:
        return m, None, None
    half = t_quantile(1 - (1 - level) / 2, len(values) - 1) * stdev(values) / math.sqrt(len(values))
    return m, m - half, m + half
