"""The statistics of every d5 result, for samples measured in Python."""
from __future__ import annotations

from typing import Sequence

from . import _core


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> dict:
    """The distribution-free confidence interval of the median (order statistics of the binomial).

    {"available", "lower", "upper", "lower_rank", "upper_rank" (1-based), "achieved_level",
    "reason" (why unavailable: too few samples, 6 for 95%)}.
    """
    return _core._median_ci([float(x) for x in samples], confidence)


def mann_whitney(a: Sequence[float], b: Sequence[float], method: str = "auto") -> dict:
    """Two-sided Mann-Whitney U test of a against b (as scipy.stats.mannwhitneyu).

    {"u_x", "u_y", "z", "p_value", "exact"}; method "auto", "exact" or "asymptotic".
    """
    return _core._mann_whitney([float(x) for x in a], [float(x) for x in b], method)


def summarize(samples: Sequence[float]) -> dict:
    """n, min, max, mean, stddev, median with its CI, percentiles and outliers, as in result files."""
    return _core._summarize([float(x) for x in samples])
