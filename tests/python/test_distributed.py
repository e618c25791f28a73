"""PipelineDef.distributed(): each rank of a PyTorch DDP job reads its own share."""

import json
import textwrap

import pytest

import dataecho as de
from conftest import IMAGES, LABELS, run_ranks


def ids_of(definition):
    return [i for b in definition.build(as_numpy=True) for i in b.ids]


@pytest.mark.parametrize("echo", [1, 3])
def test_elements_are_split_between_ranks_exactly_once(echo):
    d = de.idx(IMAGES, LABELS, limit=600)
    if echo > 1:
        d = d.echo(echo)
    d = d.batch(32)
    got = [ids_of(d.distributed(rank=r, world_size=3)) for r in range(3)]
    distinct = [set(g) for g in got]
    assert all(len(g) == 200 * echo for g in got)
    assert set().union(*distinct) == set(range(600))
    assert sum(len(s) for s in distinct) == 600  # disjoint


def test_files_are_split_whole_when_there_are_enough(shards):
    d = de.tfrecord(str(shards / "tfrecord" / "train-{00000..00003}-of-00004.tfrecord"),
                    features={"label": "image/class/label"}).batch(50)
    spec = d.distributed(rank=1, world_size=2).to_spec()
    assert spec["stages"][0] == {"op": "shard", "num_shards": 2, "index": 1}
    both = [set(ids_of(d.distributed(rank=r, world_size=2))) for r in range(2)]
    assert not both[0] & both[1]
    assert len(both[0] | both[1]) == len(ids_of(d))


def test_bad_rank_and_a_second_shard_are_refused(monkeypatch):
    d = de.idx(IMAGES, LABELS, limit=10)
    with pytest.raises(de.SpecError, match="rank 2 is outside a world of 2"):
        d.distributed(rank=2, world_size=2)
    with pytest.raises(de.SpecError, match=r"\$\.stages\[0\] \(shard\): the pipeline is sharded already"):
        d.shard(2, 0).distributed(rank=0, world_size=2)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(de.SpecError, match="torch.distributed is not initialized"):
        d.distributed()


def test_ranks_of_torch_distributed_read_disjoint_shares(tmp_path):
    # Two real ranks of torch.distributed on gloo.
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, torch.distributed as dist
        import dataecho as de
        dist.init_process_group("gloo")
        d = de.idx({IMAGES!r}, {LABELS!r}, limit=300).batch(20).distributed()
        ids = [i for b in d.build(seed=1 + dist.get_rank(), as_numpy=True) for i in b.ids]
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, ids)
        if dist.get_rank() == 0:
            open({str(tmp_path / "ids.json")!r}, "w").write(json.dumps(everyone))
        dist.destroy_process_group()
    """))
    assert run_ranks(script, 2) == [0, 0]
    a, b = json.loads((tmp_path / "ids.json").read_text())
    assert len(a) == len(b) == 150
    assert not set(a) & set(b)
    assert set(a) | set(b) == set(range(300))
