"""Epochs: every pass over a pipeline (a DataLoader pass, a second iteration of a built
pipeline, set_epoch) is a new epoch whose shuffles and augmentations draw from (seed,
epoch); the same (seed, epoch) is the same in any process and with any number of
DataLoader workers; a saved state carries its epoch."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.utils.data

import dataecho as de


def definition(shards=None):
    """Shuffled, augmented with random crops and flips, batched: ids and pixels."""
    if shards is None:
        return de.range(64).shuffle(16).batch(8)
    return (de.tfrecord(str(shards / "tfrecord" / "train-{00000..00003}-of-00004.tfrecord"))
            .shuffle(100).map("decode_image").map("augment", pad_crop=2, flip=True, normalize=True)
            .batch(50))


def passes(iterable, n):
    """n passes, each as (ids in order, the pixels' sum per batch)."""
    out = []
    for _ in range(n):
        ids, sums = [], []
        for b in iterable:
            ids += [int(i) for i in (b["__ids__"] if "__ids__" in b else b.ids)]
            if "image" in b:
                sums.append(float(torch.as_tensor(b["image"]).double().sum()))
        out.append((ids, sums))
    return out


def test_a_second_iteration_of_a_built_pipeline_is_the_next_epoch():
    p = definition().build(seed=7)
    assert p.epoch == 0
    e0 = [int(x) for b in p for x in b["value"]]
    e1 = [int(x) for b in p for x in b["value"]]
    assert p.epoch == 1
    assert sorted(e0) == sorted(e1) == list(range(64))
    assert e0 != e1, "epoch 1 has epoch 0's order"
    # Epoch 0 is the definition as built before epochs existed; epoch 1 is for_epoch(1).
    assert e0 == [int(x) for b in definition().build(seed=7) for x in b["value"]]
    assert e1 == [int(x) for b in definition().build(seed=7, epoch=1) for x in b["value"]]
    assert e1 == [int(x) for b in definition().seed(7).for_epoch(1).build() for x in b["value"]]


def test_a_partial_iteration_goes_on_and_set_epoch_starts_over():
    p = definition().build(seed=7)
    first = next(iter(p))["value"].tolist()
    rest = [int(x) for b in p for x in b["value"]]
    assert len(first) + len(rest) == 64 and p.epoch == 0
    p.set_epoch(3)
    e3 = [int(x) for b in p for x in b["value"]]
    assert e3 == [int(x) for b in definition().build(seed=7, epoch=3) for x in b["value"]]
    with pytest.raises(de.SpecError, match="epoch >= 0"):
        p.set_epoch(-1)


def test_build_without_a_seed_is_deterministic_and_epochs_still_differ():
    a = [int(x) for b in definition().build() for x in b["value"]]
    assert a == [int(x) for b in definition().build() for x in b["value"]]
    assert a != [int(x) for b in definition().build(epoch=1) for x in b["value"]]


def test_dataloader_passes_are_new_epochs_with_new_augmentations(shards):
    ds = de.TorchIterable(definition(shards), seed=3, provenance=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)
    (ids0, px0), (ids1, px1) = passes(loader, 2)
    assert sorted(ids0) == sorted(ids1) and len(ids0) == 600
    assert ids0 != ids1, "the same order in two epochs"
    assert px0 != px1, "the same augmentations in two epochs"
    assert ds.next_epoch == 2
    # set_epoch: the next pass is that epoch, the same as a pipeline built at it.
    ds.set_epoch(1)
    (ids1b, px1b), = passes(loader, 1)
    assert (ids1b, px1b) == (ids1, px1)
    with definition(shards).build(seed=3, epoch=1) as p:
        assert [int(i) for b in p for i in b.ids] == ids1


@pytest.mark.parametrize("persistent", [False, True])
def test_every_worker_of_a_pass_is_in_the_same_epoch(shards, persistent):
    ds = de.TorchIterable(definition(shards), seed=3, provenance=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=persistent)
    got = passes(loader, 3)
    for ids, _ in got:
        assert sorted(ids) == list(sorted(got[0][0])) and len(ids) == 600
    assert len({tuple(ids) for ids, _ in got}) == 3, "two epochs with the same order"
    assert ds.next_epoch == 3
    # Each pass is epoch k: the same as a fresh loader told set_epoch(k), in any process.
    for k in (1, 2):
        other = de.TorchIterable(definition(shards), seed=3, provenance=True)
        other.set_epoch(k)
        again = passes(torch.utils.data.DataLoader(other, batch_size=None, num_workers=2), 1)[0]
        assert again == got[k]


def test_the_same_seed_and_epoch_in_another_process(shards, tmp_path):
    script = tmp_path / "epoch2.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        import dataecho as de
        d = (de.tfrecord("{shards}/tfrecord/train-{{00000..00003}}-of-00004.tfrecord")
             .shuffle(100).map("decode_image").map("augment", pad_crop=2, flip=True, normalize=True).batch(50))
        with d.build(seed=3, epoch=2, as_numpy=True) as p:
            print(json.dumps([[int(i) for i in b.ids] + [float(b["image"].astype("float64").sum())] for b in p]))
    """))
    runs = [subprocess.run([sys.executable, str(script)], check=True, capture_output=True, text=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1]
    with definition(shards).build(seed=3, epoch=2, as_numpy=True) as p:
        here = [[int(i) for i in b.ids] + [float(b["image"].astype("float64").sum())] for b in p]
    import json
    assert json.loads(runs[0]) == here


def test_a_state_saved_inside_epoch_3_resumes_epoch_3(shards):
    d = definition(shards)
    whole = definition(shards).build(seed=5, epoch=3, as_numpy=True)
    want = [(list(b.ids), b["image"].copy()) for b in whole]
    p = d.build(seed=5, as_numpy=True)
    p.set_epoch(3)
    head = [next(p) for _ in range(4)]
    state = p.state_dict()
    assert state["epoch"] == 3
    q = d.build(seed=5, as_numpy=True)  # epoch 0
    q.load_state_dict(state)
    assert q.epoch == 3
    rest = [(list(b.ids), b["image"]) for b in q]
    got = [(list(b.ids), b["image"]) for b in head] + rest
    assert [g[0] for g in got] == [w[0] for w in want]
    assert all(np.array_equal(g[1], w[1]) for g, w in zip(got, want))
    # Once it ends, the next iteration is epoch 4.
    assert [list(b.ids) for b in q] == [list(b.ids) for b in d.build(seed=5, epoch=4, as_numpy=True)]
    assert q.epoch == 4
