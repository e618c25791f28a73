"""The experiment protocol's statistics (docs/protocol.md), from the engine.

Medians over seeds in which runs that never reached the target count at the value their
budget ran out at (right-censored), with 95% intervals by the percentile bootstrap, for
one cell's figure and for the ratio of a baseline's median to a cell's (fresh-example
reduction, wall-clock speedup). These are the C++ functions of
``dataecho/core/run_statistics.h`` that the trainer's reports use, with the same seed
and random stream, so a figure computed here is the report's figure to the last bit::

    from dataecho import stats
    stats.estimate_median([1200.0, 1350.5, 1500.0], [False, False, True])
    # {'median': 1350.5, 'ci95': [1200.0, 1500.0], 'n': 3, 'censored': 1,
    #  'median_censored': False}

Every function checks its input: values must be finite, ``censored`` must have one flag
per value, ``resamples`` at least 1, ``level`` inside (0, 1) and ``seed`` in
[0, 2**64); anything else is a ``ValueError`` (``dataecho.SpecError``) that names the
function and what is wrong.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import _core
from ._core import SpecError

__all__ = ["estimate_median", "estimate_ratio", "median_of"]


def _check_seed(function: str, seed: int) -> None:
    if not 0 <= seed < 2**64:
        raise SpecError(f"{function}: seed must be in [0, 2**64), got {seed}")


def median_of(values: Sequence[float]) -> float:
    """The median of ``values``: the middle one, or the mean of the middle two for an even
    count; 0.0 for no values (as the C++ ``median_of``)."""
    return _core.median_of(values)


def estimate_median(
    values: Sequence[float],
    censored: Sequence[bool],
    *,
    resamples: int = 10000,
    level: float = 0.95,
    seed: int = 20190715,
) -> dict[str, Any] | None:
    """The median of the runs' ``values`` with its percentile-bootstrap interval.

    ``censored[i]`` says run i never reached the target and ``values[i]`` is where its
    budget ran out. The median is taken over all runs (a censored one sorts after a
    reached one of the same value); the interval is the ``(1 - level) / 2`` and
    ``(1 + level) / 2`` quantiles (nearest rank) of the medians of ``resamples``
    resamples drawn with replacement from a stream seeded by ``seed``.

    Returns the C++ ``MedianEstimate::to_json()``: ``{"median", "ci95": [lo, hi], "n",
    "censored" (how many runs are), "median_censored" (the median falls on a censored
    run: a lower bound)}``; None for no runs.
    """
    _check_seed("estimate_median", seed)
    return _core.estimate_median(values, censored, resamples, level, seed)


def estimate_ratio(
    base_values: Sequence[float],
    base_censored: Sequence[bool],
    cell_values: Sequence[float],
    cell_censored: Sequence[bool],
    *,
    resamples: int = 10000,
    level: float = 0.95,
    seed: int = 20190715,
) -> dict[str, Any] | None:
    """The ratio of the baseline's median to the cell's (a reduction or a speedup: above 1
    is better) with its percentile-bootstrap interval.

    Each side is a list of runs as in :func:`estimate_median`. Each resample draws the
    baseline's runs, then the cell's, from one stream seeded by ``seed``, and the interval
    is taken over the ratios of the resampled medians whose cell median is above 0.

    Returns the C++ ``RatioEstimate::to_json()``: ``{"ratio", "ci95": [lo, hi],
    "censored" (either median falls on a censored run: the ratio is bounded on one side
    only)}``; None when either side has no runs, the cell's median is not above 0, or no
    resampled cell median is.
    """
    _check_seed("estimate_ratio", seed)
    return _core.estimate_ratio(base_values, base_censored, cell_values, cell_censored, resamples, level, seed)
