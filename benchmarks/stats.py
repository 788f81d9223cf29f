# ruff: noqa: RUF001  (the multiplication sign and dashes in strings are meant)
"""Small statistics: medians, percentiles, paired ratios (no numpy needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def median(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile, ``p`` in 0..100."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ratio(numerator: float, denominator: float) -> float:
    if not denominator or math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    return numerator / denominator


def paired_ratio(ours: Sequence[float], theirs: Sequence[float], *, faster_is_lower: bool) -> float:
    """Median over rounds of the per-round ratio (each round ran both back to back).

    For latencies (``faster_is_lower``) the ratio is theirs/ours: a speed-up; for rates
    it is ours/theirs. Either way, above 1 means we are better.
    """
    pairs = [
        (theirs[i] / ours[i]) if faster_is_lower else (ours[i] / theirs[i])
        for i in range(min(len(ours), len(theirs)))
        if ours[i] and theirs[i] and not math.isnan(ours[i]) and not math.isnan(theirs[i])
    ]
    return median(pairs)


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def ms(seconds: float) -> str:
    return fmt(seconds * 1000, 3 if seconds < 0.01 else 2)


def us(seconds: float) -> str:
    return fmt(seconds * 1e6, 1)
