"""What the tuner of "auto" settings learned survives a rebuild of the same definition
in the process: a loop that builds a pipeline per epoch starts each
one from the last one's choices. The exact rules are tested in C++ (tests/core/tuner_test.cc
TunerRemembers.*, tests/ops/autotune_memory_test.cc); here the Python side: the builder's
``autotune(remember=...)``, ``dataecho.clear_tuner_memory()``, ``Pipeline.tuning()``'s
``remember``/``resumed``/``resumed_from``, and the state dict."""

import re
import time

import dataecho as de


def _sleepy() -> de.PipelineDef:
    # Elements of 2 ms of sleep: more threads help, at almost no CPU.
    return de.range(1_000_000).map("sleep", ms=2, parallelism="auto").prefetch("auto").seed(4)


def _parallelism(t: dict) -> int:
    return next(int(k["value"]) for k in t["knobs"] if k["param"] == "parallelism")


def _start_value(t: dict) -> int:
    # The value the pipeline started at: the first change's "from", else the value now.
    for c in t["changes"]:
        if c["param"] == "parallelism":
            return int(c["from"])
    return _parallelism(t)


def _pull_until_raised(p: de.Pipeline, seconds: float = 60) -> int:
    """Pulls until the tuner has raised the map's parallelism (the first window, 0.25 s,
    on a quiet machine); returns the elements pulled."""
    it = iter(p)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        assert int(next(it)["value"]) == n
        n += 1
        if n % 20 == 0 and _parallelism(p.tuning()) >= 2:
            return n
    raise AssertionError(f"no raise in {seconds} s: {p.tuning()}")


def test_a_rebuilt_pipeline_starts_from_the_last_ones_choice():
    de.clear_tuner_memory()
    d = _sleepy()
    first = d.build()
    t = first.tuning()
    assert t["remember"] is True and t["resumed"] is False and t["resumed_from"] is None
    _pull_until_raised(first)
    first.close()  # stores what it chose (it stores after every window too)

    # Another seed and budgets: the same entry. It starts from the first one's choice,
    # not from the spec's 1.
    again = d.seed(9).autotune(cpu_budget=1).build()
    t = again.tuning()
    assert t["resumed"] is True and t["resumed_from"] == "memory", t
    assert t["elapsed_s"] > 0
    assert _start_value(t) >= 2, t
    it = iter(again)
    assert [int(next(it)["value"]) for _ in range(50)] == list(range(50))
    again.close()


def test_remember_false_and_clear_tuner_memory_start_from_the_spec():
    de.clear_tuner_memory()
    d = _sleepy()
    p = d.build()
    _pull_until_raised(p)
    p.close()

    forgetful = d.autotune(remember=False)
    assert forgetful.to_spec()["autotune"] == {"remember": False}
    assert de.PipelineDef.from_spec(forgetful.to_spec()) == forgetful
    q = forgetful.build()
    t = q.tuning()
    assert t["remember"] is False and t["resumed"] is False
    assert _start_value(t) == 1
    q.close()

    assert _start_value(d.build().tuning()) >= 2  # the memory is still there
    de.clear_tuner_memory()
    r = d.build()
    t = r.tuning()
    assert t["resumed"] is False and _start_value(t) == 1, t
    r.close()


def test_the_state_dict_carries_what_the_tuner_learned():
    de.clear_tuner_memory()
    d = _sleepy()
    p = d.build()
    n = _pull_until_raised(p)
    state = p.state_dict()
    p.close()
    # The memo in the state (JSON, its keys in order): the parallelism when it was saved.
    m = re.search(rb'"param":"parallelism".*?"value":(\d+)', state["state"])
    assert m, state
    chosen = int(m.group(1))
    assert chosen >= 2

    de.clear_tuner_memory()
    q = d.build()
    q.load_state_dict(state)
    t = q.tuning()
    assert t["resumed_from"] == "state", t
    assert _parallelism(t) == chosen or any(c["from"] == chosen for c in t["changes"]), t
    it = iter(q)
    assert [int(next(it)["value"]) for _ in range(5)] == list(range(n, n + 5))
    q.close()


def test_clear_tuner_memory_is_documented_and_exported():
    assert "clear_tuner_memory" in de.__all__
    assert de.clear_tuner_memory.__doc__ and "forgets" in de.clear_tuner_memory.__doc__.lower()
    assert "remember" in (de.PipelineDef.autotune.__doc__ or "")
