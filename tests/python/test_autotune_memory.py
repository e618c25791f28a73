"""What the tuner of "auto" settings learned survives a rebuild of the same definition
in the process (issue 43, part 2): a loop that builds a pipeline per epoch starts each
one from the last one's choices. The exact rules are tested in C++ (tests/core/tuner_test.cc
TunerRemembers.*, tests/ops/autotune_memory_test.cc); here the Python side: the builder's
``autotune(remember=...)``, ``dataecho.clear_tuner_memory()``, ``Pipeline.tuning()``'s
``remember``/``resumed``/``resumed_from``, and the state dict."""

import re

import dataecho as de


def _sleepy() -> de.PipelineDef:
    # 300 elements of 5 ms: 1.5 s at parallelism 1; the first window (0.25 s) raises it.
    return de.range(300).map("sleep", ms=5, parallelism="auto").prefetch("auto").seed(4)


def _parallelism(t: dict) -> int:
    return next(int(k["value"]) for k in t["knobs"] if k["param"] == "parallelism")


def _start_value(t: dict) -> int:
    # The value the pipeline started at: the first change's "from", else the value now.
    for c in t["changes"]:
        if c["param"] == "parallelism":
            return int(c["from"])
    return _parallelism(t)


def test_a_rebuilt_pipeline_starts_from_the_last_ones_choice():
    de.clear_tuner_memory()
    d = _sleepy()
    first = d.build()
    assert [int(e["value"]) for e in first] == list(range(300))
    t = first.tuning()
    assert t["remember"] is True and t["resumed"] is False and t["resumed_from"] is None
    assert _parallelism(t) >= 2, t
    first.close()  # stores what it chose (it stores after every window too)

    # Another seed and budgets: the same entry.
    again = d.seed(9).autotune(cpu_budget=1).build()
    t = again.tuning()
    assert t["resumed"] is True and t["resumed_from"] == "memory", t
    assert t["elapsed_s"] > 0
    # Not the spec's 1: what the first pipeline chose (a raise still on trial when the
    # data ended may have been taken back since, so not necessarily its value above).
    assert _start_value(t) >= 2, t
    assert [int(e["value"]) for e in again] == list(range(300))
    again.close()


def test_remember_false_and_clear_tuner_memory_start_from_the_spec():
    de.clear_tuner_memory()
    d = _sleepy()
    p = d.build()
    for _ in p:
        pass
    assert _parallelism(p.tuning()) >= 2
    p.close()

    forgetful = d.autotune(remember=False)
    assert forgetful.to_spec()["autotune"] == {"remember": False}
    assert de.PipelineDef.from_spec(forgetful.to_spec()) == forgetful
    q = forgetful.build()
    t = q.tuning()
    assert t["remember"] is False and t["resumed"] is False
    assert _start_value(t) == 1
    q.close()

    de.clear_tuner_memory()
    r = d.build()
    t = r.tuning()
    assert t["resumed"] is False and _start_value(t) == 1, t
    r.close()


def test_the_state_dict_carries_what_the_tuner_learned():
    de.clear_tuner_memory()
    d = _sleepy()
    p = d.build()
    it = iter(p)
    head = [int(next(it)["value"]) for _ in range(200)]
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
    assert _start_value(t) == chosen or _parallelism(t) == chosen, t
    assert head + [int(e["value"]) for e in q] == list(range(300))
    q.close()


def test_clear_tuner_memory_is_documented_and_exported():
    assert "clear_tuner_memory" in de.__all__
    assert de.clear_tuner_memory.__doc__ and "forgets" in de.clear_tuner_memory.__doc__.lower()
    assert "remember" in (de.PipelineDef.autotune.__doc__ or "")
