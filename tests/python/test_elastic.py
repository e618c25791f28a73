"""Elastic order from Python: the global batches do not depend on the number of ranks, and
the ranks' state_dicts merge (dataecho.merge_states) into one that resumes on another
number of ranks with nothing lost and nothing read twice."""

import json
import pickle
import re
import textwrap
from collections import Counter

import pytest

import dataecho as de
from conftest import run_ranks

LANES = 6
SEED = 11
SAVED_AT = 4  # batches each rank returns before its state is saved


def example_echo() -> de.PipelineDef:  # echo before the batch, in the lanes
    return de.range(150).echo(2).shuffle(8).batch(12).prefetch(2)


def batch_echo() -> de.PipelineDef:  # echo after the batch, in the merge
    return de.range(90).shuffle(8).batch(12).echo(2)


VARIANTS = {"example_echo": example_echo, "batch_echo": batch_echo}


def rank_pipelines(d: de.PipelineDef, world: int):
    return [d.distributed(rank=r, world_size=world, elastic=True, lanes=LANES).build(seed=SEED, as_numpy=True)
            for r in range(world)]


def rows(batch):
    return list(zip(batch.ids, batch.echo))


def global_steps(pipelines, steps=None):
    """Per step, the rows of every rank's batch together (sorted); `steps` batches per rank,
    or to the end."""
    per_rank = [[rows(b) for _, b in zip(range(steps), p)] if steps is not None else [rows(b) for b in p]
                for p in pipelines]
    n = max(len(r) for r in per_rank)
    return [sorted(row for r in per_rank if i < len(r) for row in r[i]) for i in range(n)]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_global_batches_are_the_same_for_any_world_size(variant):
    d = VARIANTS[variant]()
    one = global_steps(rank_pipelines(d, 1))
    assert len(one) >= 10 and len(one[0]) == 12  # the lanes' ends shrink the last few
    records = 150 if variant == "example_echo" else 90
    assert Counter(r for s in one for r in s) == Counter((i, e) for i in range(records) for e in range(2))
    for world in (2, 3):
        ranks = rank_pipelines(d, world)
        assert global_steps(ranks) == one, f"{world} ranks"
        assert all(len(next(p).ids) == 12 // world for p in rank_pipelines(d, world))


def save_merged(d: de.PipelineDef, world: int):
    """`world` ranks each return SAVED_AT batches; their rows per step, and merge_states of
    their state_dicts (given in reverse rank order: the order does not matter)."""
    ranks = rank_pipelines(d, world)
    before = global_steps(ranks, SAVED_AT)
    return before, de.merge_states([p.state_dict() for p in reversed(ranks)])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("saved_on,resumed_on", [(2, 1), (1, 2), (2, 3), (3, 2)])
def test_state_dicts_merge_and_resume_on_another_world_size(variant, saved_on, resumed_on):
    d = VARIANTS[variant]()
    uninterrupted = global_steps(rank_pipelines(d, 1))
    before, merged = save_merged(d, saved_on)
    merged = pickle.loads(pickle.dumps(merged))  # as a checkpoint holds it
    assert merged["format"] == "dataecho.state/1" and merged["epoch"] == 0
    resumed = rank_pipelines(d, resumed_on)
    for p in resumed:
        p.load_state_dict(merged)
    after = global_steps(resumed)
    assert before + after == uninterrupted
    # The multiset of (id, echo index) over both parts is the uninterrupted run's.
    assert Counter(r for s in before + after for r in s) == Counter(r for s in uninterrupted for r in s)


def test_elastic_refusals_say_why():
    d = example_echo()
    # No seed: every rank must draw the same order.
    with pytest.raises(de.SpecError, match=r"elastic.*no seed.*build\(seed=\.\.\.\).*same seed on every rank"):
        d.elastic(lanes=LANES).build()
    with pytest.raises(de.SpecError, match=r"6 lanes do not split over 4 ranks: use 1, 2, 3 or 6"):
        d.distributed(rank=0, world_size=4, elastic=True, lanes=LANES).build(seed=SEED)
    with pytest.raises(de.SpecError, match=r"\$\.stages\[4\] \(shard\): the pipeline has a shard stage already"):
        d.shard(2, 0).distributed(rank=0, world_size=2, elastic=True)
    with pytest.raises(de.SpecError, match=r"the pipeline has an elastic stage already"):
        d.elastic(lanes=LANES).elastic(lanes=LANES)
    assert d.elastic(lanes=LANES).stages[0] == {"op": "elastic", "lanes": LANES}
    assert d.distributed(rank=1, world_size=3, elastic=True, lanes=LANES).stages[0] == {
        "op": "elastic", "lanes": LANES, "world_size": 3, "rank": 1}

    two = rank_pipelines(d, 2)
    for p in two:
        next(p)
    states = [p.state_dict() for p in two]
    with pytest.raises(de.SpecError, match=r"merge_states: lanes 1, 3, 5 are missing: merge the states of every rank"):
        de.merge_states(states[:1])
    with pytest.raises(de.SpecError, match=r"lane 0 is in the states of rank 0 of 2 and rank 0 of 2"):
        de.merge_states([states[0], states[0]])
    next(two[1])
    with pytest.raises(de.SpecError, match=r"rank 1 of 2 was saved at step 2 .*rank 0 of 2 at 1.*same step"):
        de.merge_states([states[0], two[1].state_dict()])
    other_seed = d.distributed(rank=1, world_size=2, elastic=True, lanes=LANES).build(seed=SEED + 1, as_numpy=True)
    next(other_seed)
    with pytest.raises(de.SpecError, match=r"different pipelines .*give every rank the same seed"):
        de.merge_states([states[0], other_seed.state_dict()])
    with pytest.raises(de.SpecError, match=r"merge_states: state 1 is at epoch 1 and state 0 at epoch 0"):
        de.merge_states([states[0], dict(states[1], epoch=1)])
    plain = example_echo().build(seed=SEED, as_numpy=True)
    next(plain)
    with pytest.raises(de.SpecError, match=r"merge_states: .*state 0 is not an elastic pipeline's state"):
        de.merge_states([plain.state_dict()])
    with pytest.raises(de.SpecError, match=r"merge_states: state 1 is not a state_dict\(\) of a dataecho pipeline"):
        de.merge_states([states[0], {"state": b""}])
    with pytest.raises(de.SpecError, match=r"merge_states: no states to merge"):
        de.merge_states([])
    # One rank's own state restores only on its own rank and world size.
    one = rank_pipelines(d, 1)[0]
    with pytest.raises(de.SpecError, match=r"holds lanes 0, 2, 4 of 6; this rank \(0 of 1\) needs 0, 1, 2, 3, 4, 5: "
                       r"restore from dataecho\.merge_states of every rank's state"):
        one.load_state_dict(states[0])


def test_two_gloo_ranks_then_one(tmp_path):
    """Two ranks of torch.distributed (gloo) read, gather their state_dicts with
    all_gather_object and merge them; one rank resumes from the merged state."""
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(f"""
        import json, pickle, torch.distributed as dist
        import dataecho as de
        dist.init_process_group("gloo")
        d = de.range(150).echo(2).shuffle(8).batch(12).prefetch(2).distributed(elastic=True, lanes={LANES})
        p = d.build(seed={SEED}, as_numpy=True)
        rows = [list(zip(b.ids, b.echo)) for _, b in zip(range({SAVED_AT}), p)]
        states = [None] * dist.get_world_size()
        dist.all_gather_object(states, p.state_dict())
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, rows)
        if dist.get_rank() == 0:
            open({str(tmp_path / "merged.pkl")!r}, "wb").write(pickle.dumps(de.merge_states(states)))
            open({str(tmp_path / "rows.json")!r}, "w").write(json.dumps(everyone))
        dist.destroy_process_group()
    """))
    assert run_ranks(script, 2) == [0, 0]
    before = [tuple(r) for rank in json.loads((tmp_path / "rows.json").read_text()) for b in rank for r in b]
    one = example_echo().distributed(rank=0, world_size=1, elastic=True, lanes=LANES).build(seed=SEED,
                                                                                            as_numpy=True)
    one.load_state_dict(pickle.loads((tmp_path / "merged.pkl").read_bytes()))
    after = [r for b in one for r in rows(b)]
    assert len(before) == 2 * SAVED_AT * 6
    uninterrupted = [r for s in global_steps(rank_pipelines(example_echo(), 1)) for r in s]
    assert Counter(before + after) == Counter(uninterrupted)


def loader_rows(batches):
    """The (id, echo) rows of a DataLoader's batches (provenance=True), with no lane field left."""
    out = []
    for b in batches:
        assert "__lanes__" not in b and "__lane_state__" not in b
        out += list(zip(b["__ids__"].tolist(), b["__echo__"].tolist()))
    return out


WORKERS_ABOVE_CORES = pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 3 on 2 cores


@WORKERS_ABOVE_CORES
def test_a_dataloader_reads_the_ranks_rows_with_or_without_workers():
    import torch

    d = example_echo().distributed(rank=1, world_size=2, elastic=True, lanes=LANES)
    expected = [rows(b) for b in d.build(seed=SEED, as_numpy=True)]
    loader = torch.utils.data.DataLoader(de.TorchIterable(d, seed=SEED, provenance=True), batch_size=None)
    assert [list(zip(b["__ids__"].tolist(), b["__echo__"].tolist())) for b in loader] == expected
    # Worker w of 3 is consumer 1 + 2w of 6: each batch keeps the rank's 6 rows.
    workers = torch.utils.data.DataLoader(de.TorchIterable(d, seed=SEED, provenance=True), batch_size=None,
                                          num_workers=3)
    batches = list(workers)
    assert all(len(b["__ids__"]) <= 6 for b in batches) and len(batches[0]["__ids__"]) == 6
    assert Counter(loader_rows(batches)) == Counter(r for b in expected for r in b)
    too_many = iter(torch.utils.data.DataLoader(de.TorchIterable(d, seed=SEED), batch_size=None, num_workers=2))
    try:
        next(too_many)
        message = ""
    except de.SpecError as e:
        message = str(e)
    # Now: the failed iterator is in a reference cycle, and its shutdown by the garbage
    # collector, later, held the next test for 5 s (one worker's join timeout).
    too_many._shutdown_workers()
    assert re.search(r"TorchIterable with 2 DataLoader workers: .*6 lanes do not split over 4 consumers \(2 ranks of "
                     r"2 consumers each\): use 1 or 3 consumers per rank", message), message


def stateful(d, workers, snapshot_every=2):
    return de.StatefulDataLoader(de.TorchIterable(d, seed=SEED, provenance=True), num_workers=workers,
                                 snapshot_every=snapshot_every)


@WORKERS_ABOVE_CORES
@pytest.mark.parametrize("saved_on,resumed_on", [(2, 1), (1, 2), (2, 3)])
def test_dataloader_workers_resume_on_another_worker_count(saved_on, resumed_on):
    d = example_echo().elastic(lanes=LANES)
    uninterrupted = loader_rows(stateful(d, 0))
    assert len(uninterrupted) == 300
    loader = stateful(d, saved_on)
    it = iter(loader)
    before = loader_rows(next(it) for _ in range(4))  # each worker past its first snapshot
    state = pickle.loads(pickle.dumps(loader.state_dict()))
    del it
    assert state["format"] == "dataecho.loader-state/1" and state["epoch"] == 0
    assert sum(state["skip"].values()) > 0  # rows returned after a worker's snapshot
    resumed = stateful(d, resumed_on)
    resumed.load_state_dict(state)
    after = loader_rows(resumed)
    assert Counter(before + after) == Counter(uninterrupted)
    assert resumed.state_dict()["epoch"] == 1 and resumed.state_dict()["state"] is None


@WORKERS_ABOVE_CORES
def test_a_state_saved_before_every_worker_returned_a_batch_resumes():
    d = example_echo().elastic(lanes=LANES)
    loader = stateful(d, 3)
    it = iter(loader)
    before = loader_rows([next(it)])  # workers 1 and 2 have returned nothing: their lanes are at the start
    state = loader.state_dict()
    del it
    resumed = stateful(d, 2)
    resumed.load_state_dict(state)
    assert Counter(before + loader_rows(resumed)) == Counter(loader_rows(stateful(d, 0)))


def test_a_stateful_dataloader_without_workers_resumes_exactly():
    d = example_echo().elastic(lanes=LANES)
    whole = [rows_of for rows_of in map(lambda b: loader_rows([b]), stateful(d, 0))]
    loader = stateful(d, 0)
    it = iter(loader)
    first = [loader_rows([next(it)]) for _ in range(3)]
    state = loader.state_dict()
    assert state["skip"] == {}
    again = stateful(d, 0)
    again.load_state_dict(state)
    assert first + [loader_rows([b]) for b in again] == whole
    # Before any batch, the loaded state is the state.
    fresh = stateful(d, 2)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state


def test_stateful_dataloader_refusals_say_why():
    elastic = example_echo().elastic(lanes=LANES)
    with pytest.raises(de.SpecError, match=r"batch echo \(the echo after the batch\) takes num_workers=0: a "
                                           r"worker's snapshot"):
        stateful(batch_echo().elastic(lanes=LANES), 2)
    with pytest.raises(de.SpecError, match=r"with 2 workers the pipeline must be elastic"):
        stateful(example_echo(), 2)
    with pytest.raises(de.SpecError, match=r"leave batch_size out"):
        de.StatefulDataLoader(de.TorchIterable(elastic), batch_size=4)
    with pytest.raises(de.SpecError, match=r"persistent workers"):
        de.StatefulDataLoader(de.TorchIterable(elastic), num_workers=2, persistent_workers=True)
    with pytest.raises(de.SpecError, match=r"not a StatefulDataLoader state"):
        stateful(elastic, 0).load_state_dict({"format": "dataecho.state/1"})
    with pytest.raises(de.SpecError, match=r"does not hold lane 9"):
        loader = stateful(elastic, 0)
        loader.load_state_dict({"format": "dataecho.loader-state/1", "epoch": 0, "skip": {9: 1},
                                "state": stateful_state(elastic)})


def stateful_state(d):
    loader = stateful(d, 0)
    it = iter(loader)
    next(it)
    return loader.state_dict()["state"]
