#!/usr/bin/env python3
"""The checks of scripts/netns_faults.sh, on the files the trainer and `dataecho pipe` write.

  check.py same DIR_A DIR_B    two trainer outputs end with the same checkpoint: model.pt,
                               losses.bin and every rank's pipeline state byte for byte;
                               the optimizer's tensors, every rank's set of examples
                               trained on, and the counters of state.json (times excluded)
                               equal; prints the model's SHA-256
  check.py whole DIR           DIR/checkpoint is complete and readable: state.json parses,
                               each rank's files are there (elastic sharding's one merged
                               file of each), model.pt and optimizer.pt are zip archives
                               whose every entry has a good CRC
  check.py elastic REF DIR     an elastic run that was interrupted and resumed (DIR) ends as
                               the uninterrupted one (REF): the same steps, fresh and echoed
                               counts and stop reason, the same set of (id, epoch) pairs
                               trained on in the merged fresh_keys.bin, each once, as many
                               as the fresh count, and every step's loss within 1e-4
  check.py records SHARDS... -- OUT.jsonl
                               the records `dataecho pipe --values` printed (one JSON line
                               per raw TFRecord record) are those of the local shards, each
                               exactly once: count, ids and the SHA-256 of each record

Exit status 0 when the check holds, 1 otherwise (with the reason on standard error).
"""

import hashlib
import json
import os
import struct
import sys
import zipfile

# state.json fields that measure time rather than the training state.
TIMES = {
    "compute_seconds", "eval_seconds", "snapshot_seconds", "train_seconds", "wait_seconds",
    "wall_seconds", "wall_seconds_to_target", "seconds_to_target",
}


def fail(message):
    print(f"check: {message}", file=sys.stderr)
    sys.exit(1)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def zip_entries(path):
    """A torch::save archive's entries as {name without the archive's folder: CRC}.
    LibTorch numbers an optimizer's tensors in an order that differs between runs, so two
    archives are compared as the multiset of their tensors' CRCs plus the pickle."""
    with zipfile.ZipFile(path) as z:
        return {i.filename.split("/", 1)[-1]: i.CRC for i in z.infolist()}


def same_optimizer(a, b):
    ea, eb = zip_entries(a), zip_entries(b)
    data_a = sorted(c for n, c in ea.items() if n.startswith("data/"))
    data_b = sorted(c for n, c in eb.items() if n.startswith("data/"))
    return data_a == data_b and len(ea) == len(eb)


def fresh_keys(path):
    """A fresh_keys-rank-R.bin as the set it holds: (id, epoch) records of 12 bytes, which
    the trainer writes in its hash set's order (another after a resume)."""
    data = read(path)
    return sorted(data[i : i + 12] for i in range(0, len(data), 12))


def checkpoint_files(ckpt):
    """The checkpoint's state.json and the files it must hold: every rank's pipeline state
    and read set, or with elastic sharding the one merged file of each (no pipeline state
    once the data has ended)."""
    state = json.loads(read(os.path.join(ckpt, "state.json")))
    files = ["model.pt", "optimizer.pt", "losses.bin", "state.json"]
    if state.get("sharding") == "elastic":
        if not state.get("pipeline_ended", False):
            files.append("pipeline.state")
        return state, files + ["fresh_keys.bin"]
    for r in range(state["world_size"]):
        files += [f"pipeline-rank-{r}.state", f"fresh_keys-rank-{r}.bin"]
    return state, files


def cmd_same(a, b):
    ca, cb = os.path.join(a, "checkpoint"), os.path.join(b, "checkpoint")
    sa, files = checkpoint_files(ca)
    sb, _ = checkpoint_files(cb)
    for f in files:
        if f == "state.json":
            ka = {k: v for k, v in sa.items() if k not in TIMES}
            kb = {k: v for k, v in sb.items() if k not in TIMES}
            if ka != kb:
                diff = sorted(k for k in ka.keys() | kb.keys() if ka.get(k) != kb.get(k))
                fail(f"state.json differs in {diff}")
        elif f == "optimizer.pt":
            if not same_optimizer(os.path.join(ca, f), os.path.join(cb, f)):
                fail("optimizer.pt: the tensors differ")
        elif f.startswith("fresh_keys"):
            if fresh_keys(os.path.join(ca, f)) != fresh_keys(os.path.join(cb, f)):
                fail(f"{f}: the examples trained on differ")
        elif read(os.path.join(ca, f)) != read(os.path.join(cb, f)):
            fail(f"{f} differs between {a} and {b}")
    for d in (a, b):
        summary = json.loads(read(os.path.join(d, "summary.json")))
        if summary.get("ranks_identical") is not True:
            fail(f"{d}/summary.json: the ranks' models were not identical")
    model = sha(read(os.path.join(ca, "model.pt")))
    print(f"same: step {sa['step']}, {len(files)} files equal; model.pt sha256 {model}")


def cmd_whole(d):
    ckpt = os.path.join(d, "checkpoint")
    try:
        state, files = checkpoint_files(ckpt)
    except (OSError, ValueError, KeyError) as e:
        fail(f"{ckpt}/state.json: {e}")
    for f in files:
        if not os.path.isfile(os.path.join(ckpt, f)):
            fail(f"{ckpt}/{f} is missing")
    for f in ("model.pt", "optimizer.pt"):
        try:
            with zipfile.ZipFile(os.path.join(ckpt, f)) as z:
                bad = z.testzip()
        except zipfile.BadZipFile as e:
            fail(f"{ckpt}/{f}: {e}")
        if bad:
            fail(f"{ckpt}/{f}: entry {bad} has a bad CRC")
    if len(read(os.path.join(ckpt, "losses.bin"))) != 4 * state["step"]:
        fail(f"{ckpt}/losses.bin does not hold {state['step']} losses")
    print(f"whole: step {state['step']}, {len(files)} files, archives' CRCs good")


def losses(ckpt: str) -> tuple[float, ...]:
    """Every step's loss from a checkpoint's losses.bin (float32 each)."""
    data = read(os.path.join(ckpt, "losses.bin"))
    return struct.unpack(f"<{len(data) // 4}f", data)


def cmd_elastic(ref: str, d: str) -> None:
    """DIR ends as the uninterrupted run REF (the module's docstring says what is compared)."""
    sr, sd = (json.loads(read(os.path.join(x, "summary.json"))) for x in (ref, d))
    for k in ("steps", "fresh", "echoed", "stop_reason"):
        if sr.get(k) != sd.get(k):
            fail(f"{k}: {sd.get(k)} in {d}, {sr.get(k)} in the uninterrupted run")
    if sd.get("ranks_identical") is not True:
        fail(f"{d}/summary.json: the ranks' models were not identical")
    cr, cd = os.path.join(ref, "checkpoint"), os.path.join(d, "checkpoint")
    kr = fresh_keys(os.path.join(cr, "fresh_keys.bin"))
    kd = fresh_keys(os.path.join(cd, "fresh_keys.bin"))
    if len(set(kd)) != len(kd):
        fail(f"{cd}/fresh_keys.bin holds {len(kd) - len(set(kd))} pairs twice")
    if kr != kd:
        lost, extra = len(set(kr) - set(kd)), len(set(kd) - set(kr))
        fail(f"the examples trained on differ: {lost} of the uninterrupted run's missing, "
             f"{extra} others")
    if len(kd) != sd["fresh"]:
        fail(f"fresh_keys.bin holds {len(kd)} pairs and the run counted {sd['fresh']} fresh")
    lr, ld = losses(cr), losses(cd)
    if len(lr) != len(ld):
        fail(f"{len(ld)} losses in {d}, {len(lr)} in the uninterrupted run")
    worst = max((abs(a - b) for a, b in zip(lr, ld)), default=0.0)
    if worst > 1e-4:
        step = next(i for i, (a, b) in enumerate(zip(lr, ld)) if abs(a - b) > 1e-4)
        fail(f"step {step}'s loss {ld[step]} differs from the uninterrupted run's {lr[step]}")
    ids = sorted({struct.unpack_from("<q", k)[0] for k in kd})
    print(f"elastic: steps {sd['steps']}, fresh {sd['fresh']}, echoed {sd['echoed']}, "
          f"stop {sd['stop_reason']} as uninterrupted; {len(kd)} (id, epoch) pairs trained on, "
          f"ids {ids[0]}-{ids[-1]}, the same set, none twice; losses within {worst:.1e}")


def tfrecords(path):
    """The records of one TFRecord file (framing only: length, its CRC, data, its CRC)."""
    data = read(path)
    at, out = 0, []
    while at < len(data):
        (n,) = struct.unpack_from("<Q", data, at)
        out.append(data[at + 12 : at + 12 + n])
        at += 12 + n + 4
    return out


def cmd_records(shards, printed):
    # dataecho's id of a record: its shard's index in the list << 40 | its index in it
    want = {}
    for s, path in enumerate(shards):
        for i, rec in enumerate(tfrecords(path)):
            want[(s << 40) | i] = sha(rec)
    got, dup = {}, 0
    with open(printed) as f:
        for line in f:
            e = json.loads(line)
            rid = e["ids"][0]
            if rid in got:
                dup += 1
            got[rid] = sha(bytes(e["fields"]["record"]["values"]))
    missing = len(want.keys() - got.keys())
    extra = len(got.keys() - want.keys())
    wrong = sum(1 for k in want.keys() & got.keys() if want[k] != got[k])
    total = hashlib.sha256("".join(want[k] for k in sorted(want)).encode()).hexdigest()
    print(f"records: {sum(1 for _ in open(printed))} printed, {len(want)} in the source; "
          f"duplicates {dup}, missing {missing}, unknown ids {extra}, wrong content {wrong}; "
          f"source sha256-of-sha256s {total[:16]}")
    if dup or missing or extra or wrong:
        fail("the records read are not the source's, each exactly once")


def main(argv):
    if len(argv) == 4 and argv[1] == "same":
        cmd_same(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "elastic":
        cmd_elastic(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "whole":
        cmd_whole(argv[2])
    elif len(argv) >= 5 and argv[1] == "records" and argv[-2] == "--":
        cmd_records(argv[2:-2], argv[-1])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv)
