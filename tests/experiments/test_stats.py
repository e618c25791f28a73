"""The experiments' statistics (experiments/stats.py): the engine's estimates handed on
unchanged but for the shape the committed tables have (their keys' order, a median of
counts written as a count), and the swing."""

import json
import math

import pytest
from dataecho import stats as engine

from experiments import stats


def test_the_engines_median_in_the_tables_shape():
    obs = [(1200, False), (1350, False), (1500, True)]
    e = stats.estimate_median(obs)
    want = engine.estimate_median([1200.0, 1350.0, 1500.0], [False, False, True])
    assert e == want
    # The keys in the committed tables' order; an odd count of counts: a count.
    assert json.dumps(e) == '{"median": 1350, "ci95": [1200.0, 1500.0], "n": 3, "censored": 1, ' \
                            '"median_censored": false}'
    assert isinstance(stats.estimate_median([(1.5, False), (2.5, False), (3.5, False)])["median"], float)
    assert stats.estimate_median([(1, False), (2, False)])["median"] == 1.5
    assert stats.estimate_median([]) is None


def test_the_engines_ratio_in_the_tables_shape():
    base = [(float(v), False) for v in (100, 120, 140, 160, 180)]
    cell = [(float(v), c) for v, c in ((25, False), (30, False), (35, True), (40, False), (45, False))]
    e = stats.estimate_ratio(base, cell)
    want = engine.estimate_ratio([v for v, _ in base], [c for _, c in base], [v for v, _ in cell],
                                 [c for _, c in cell])
    assert e == want and list(e) == ["ratio", "ci95", "censored"]
    assert e["ratio"] == 140 / 35 and e["censored"]
    assert e["ci95"][0] < 4 < e["ci95"][1]
    assert stats.estimate_ratio(base, []) is None
    assert stats.estimate_ratio(base, [(0.0, False)]) is None  # the cell's median is not above 0


def test_the_median_of_plain_values():
    assert stats.median([3, 1, 2]) == 2.0 and isinstance(stats.median([3, 1, 2]), float)
    assert stats.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert stats.median([0.1, 0.7]) == engine.median_of([0.1, 0.7])


def test_the_swing_of_alternating_differences():
    d = [0.01, -0.01] * 10
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    assert stats.swing(d) == pytest.approx(sd / math.sqrt(2))
    assert stats.swing([0.01]) is None and stats.swing([]) is None
