"""The experiments' statistics: the engine's, in the shape the reports use.

The protocols' statistics (docs/protocol.md section 5) are the engine's
(``dataecho.stats``, the code of the trainer's own reports): medians over seeds with the
runs that miss the target counted at their budget (right-censored), and 95% percentile
bootstrap intervals, 10,000 resamples from the fixed seed 20190715, for one cell's
median and for the ratio of a baseline's median to a cell's (both sides resampled from
one stream, the baseline first). This module hands the engine's results on as dicts with
their keys in the order the committed tables have, and adds the median of plain values
(``median``) and the swing of a series (``swing``).
"""

from __future__ import annotations

import math
import statistics
from types import ModuleType
from typing import List, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np


def _engine() -> ModuleType:
    """dataecho.stats, imported when first needed: a clear error where it is missing."""
    try:
        from dataecho import stats as engine
    except ImportError as e:
        raise ImportError(
            "experiments.stats needs the dataecho package's statistics (dataecho.stats): build it "
            "(scripts/bootstrap.sh) and put build/python on PYTHONPATH, or pip install the package"
        ) from e
    return engine

# (value, censored): one run's figure, or the budget it ran out at (censored).
Observation = Tuple[Union[int, float], bool]


class MedianEstimate(TypedDict):
    """A median over runs, its 95% interval, the runs and how many of them are censored,
    and whether the median falls on a censored run (then it is a lower bound)."""

    median: Union[int, float]
    ci95: List[float]
    n: int
    censored: int
    median_censored: bool


class RatioEstimate(TypedDict):
    """A ratio of medians, baseline over cell, its 95% interval, and whether either
    median is censored."""

    ratio: float
    ci95: List[float]
    censored: bool


def _split(obs: Sequence[Observation]) -> Tuple[List[float], List[bool]]:
    """The values and the censored flags, as the engine takes them."""
    return [float(v) for v, _ in obs], [bool(c) for _, c in obs]


def _as_given(m: float, obs: Sequence[Observation]) -> Union[int, float]:
    """The median as the values are: an int where they are ints and it is one of them
    (an odd count), as the committed tables write it."""
    if len(obs) % 2 and all(isinstance(v, int) and not isinstance(v, bool) for v, _ in obs):
        return int(m)
    return m


def estimate_median(obs: Sequence[Observation]) -> Optional[MedianEstimate]:
    """The median of ``obs`` with its bootstrap interval; None without runs."""
    values, censored = _split(obs)
    e = _engine().estimate_median(values, censored)
    if e is None:
        return None
    return {"median": _as_given(float(e["median"]), obs), "ci95": [float(x) for x in e["ci95"]],
            "n": int(e["n"]), "censored": int(e["censored"]), "median_censored": bool(e["median_censored"])}


def estimate_ratio(base: Sequence[Observation], cell: Sequence[Observation]) -> Optional[RatioEstimate]:
    """median(base) / median(cell) with its bootstrap interval; None when either side has
    no runs or the cell's median is not positive."""
    bv, bc = _split(base)
    cv, cc = _split(cell)
    e = _engine().estimate_ratio(bv, bc, cv, cc)
    if e is None:
        return None
    return {"ratio": float(e["ratio"]), "ci95": [float(x) for x in e["ci95"]], "censored": bool(e["censored"])}


def median(values: Sequence[float]) -> float:
    """The median of values (the mean of the middle two for an even count), as a float:
    the engine's median_of, without needing the engine (the calibration's search runs
    where only the tool is built)."""
    return float(statistics.median(values))


def swing(differences: Sequence[float]) -> Optional[float]:
    """The swing of a series that is a slow trend plus independent noise, from the
    differences of its successive values: their sample standard deviation over sqrt(2)
    (docs/protocol.md, the noise model). None with fewer than two differences."""
    if len(differences) < 2:
        return None
    return float(np.std(differences, ddof=1) / math.sqrt(2))
