#!/usr/bin/python3
"""Data echoing in a plain PyTorch training loop, fed by dataecho.

Fashion-MNIST (Debian's dataset-fashion-mnist) is converted to 8 TFRecord shards and
served over HTTP by nginx on loopback, throttled per connection (``--rate``), so that
reading is slower than the training step, as over a real network. Then:

1. ``de.profile`` measures R = upstream time per batch / train-step time per batch and
   recommends an echo factor;
2. the same small CNN trains twice to a target test accuracy: without echo, and with
   example echoing before augmentation at e = round(R);
3. it prints, for each, the fresh examples read and the wall-clock time to the target.

A demonstration, not evidence: one seed, one machine, a target chosen for a run of a
few minutes (docs/results.md has the protocol and the measured results).

    /usr/bin/python3 examples/python/train_fashion.py            # about 3-6 minutes
    /usr/bin/python3 examples/python/train_fashion.py --help

Needs the dataecho package (scripts/bootstrap.sh --python, or PYTHONPATH=build/python)
and the dataecho tool (for `convert` and `serve`: DATAECHO_BIN, build/bin or PATH).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch

import dataecho as de

FASHION = Path("/usr/share/datasets/fashion-mnist")


def find_tool() -> str:
    for c in (os.environ.get("DATAECHO_BIN"), Path(__file__).resolve().parents[2] / "build/bin/dataecho",
              shutil.which("dataecho")):
        if c and os.access(c, os.X_OK):
            return str(c)
    sys.exit("train_fashion: no dataecho tool (set DATAECHO_BIN, or build it: scripts/bootstrap.sh)")


def make_shards(tool: str, out: Path) -> Path:
    shards = out / "shards"
    if not (shards / "train-00007-of-00008.tfrecord").exists():
        print("converting Fashion-MNIST to 8 TFRecord shards ...", flush=True)
        subprocess.run([tool, "convert", "--images", str(FASHION / "train-images-idx3-ubyte.gz"),
                        "--labels", str(FASHION / "train-labels-idx1-ubyte.gz"), "--to", "tfrecord",
                        "--out", str(shards), "--name", "train", "--shards", "8"], check=True,
                       stdout=subprocess.DEVNULL)
    return shards


def serve(tool: str, folder: Path, rate: str) -> "tuple[subprocess.Popen, str]":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([tool, "serve", str(folder), "--port", str(port), "--rate", rate],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("train_fashion: nginx did not start (dataecho serve)")


def model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))


def pipeline(url: str, echo: float, batch: int) -> de.PipelineDef:
    d = (de.tfrecord(url + "/train-{00000..00007}-of-00008.tfrecord")
         .interleave(4)  # 4 shards at once: 4 connections
         .repeat()
         .shuffle(2000)
         .map("decode_image", parallelism=2))
    if echo > 1:  # before the augmentation: each copy is augmented differently
        d = d.echo(echo).shuffle(1000)
    return (d.map("augment", pad_crop=2, flip=True, normalize=True, parallelism=2)
            .batch(batch, drop_remainder=True)
            .prefetch(4))


def test_set() -> "tuple[torch.Tensor, torch.Tensor]":
    b = next(de.idx(str(FASHION / "t10k-images-idx3-ubyte.gz"), str(FASHION / "t10k-labels-idx1-ubyte.gz"))
             .map("normalize").batch(10_000).build())
    return b["image"], b["label"]


def accuracy(net: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    net.eval()
    with torch.no_grad():
        correct = sum(int((net(images[i:i + 2000]).argmax(1) == labels[i:i + 2000]).sum())
                      for i in range(0, len(labels), 2000))
    net.train()
    return correct / len(labels)


def train(name: str, d: de.PipelineDef, args, test) -> dict:
    torch.manual_seed(args.seed)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    fresh = step = 0
    evals = []
    t0 = time.monotonic()
    eval_s = 0.0
    stats = {}
    with d.build(seed=args.seed) as p:
        for batch in p:
            loss = torch.nn.functional.cross_entropy(net(batch["image"]), batch["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            fresh += batch.fresh_rows
            if step % args.eval_every == 0:
                e0 = time.monotonic()
                acc = accuracy(net, *test)
                eval_s += time.monotonic() - e0
                wall = time.monotonic() - t0 - eval_s  # training time: evaluations left out
                evals.append({"step": step, "fresh": fresh, "seconds": wall, "accuracy": acc})
                print(f"  {name:9s} step {step:5d} | fresh {fresh:6d} | {step * args.batch / wall:6.0f} ex/s"
                      f" | test acc {acc:.4f} | {wall:5.1f}s", flush=True)
                if acc >= args.target or fresh >= args.max_fresh:
                    stats = p.stats()
                    break
    hit = next((e for e in evals if e["accuracy"] >= args.target), None)
    return {"name": name, "evals": evals, "reached": hit is not None,
            "fresh_to_target": hit["fresh"] if hit else None, "seconds_to_target": hit["seconds"] if hit else None,
            "steps_to_target": hit["step"] if hit else None, "stats": stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="100k", help="bandwidth per connection (nginx syntax), default 100k")
    ap.add_argument("--target", type=float, default=0.85, help="test accuracy to reach (default 0.85)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--eval-every", type=int, default=50, help="steps between evaluations (10,000 test images)")
    ap.add_argument("--max-fresh", type=int, default=240_000, help="give up after this many fresh examples")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--echo", type=float, default=0, help="echo factor (default: round(R) from de.profile)")
    ap.add_argument("--out", default="out/python_example")
    args = ap.parse_args()
    torch.set_num_threads(1)  # the pipeline's threads use the other core

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tool = find_tool()
    shards = make_shards(tool, out)
    server, url = serve(tool, shards, args.rate)
    try:
        test = test_set()
        net = model()
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)

        def step(batch):
            loss = torch.nn.functional.cross_entropy(net(batch["image"]), batch["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()

        prof = de.profile(pipeline(url, 1, args.batch), step, seconds=8)
        e = args.echo or max(1.0, float(round(prof["r"])))
        print(f"profile: upstream {prof['upstream_ms_per_batch']:.1f} ms/batch, train step "
              f"{prof['downstream_ms_per_batch']:.1f} ms/batch, R = {prof['r']:.2f}; "
              f"slowest stage {prof['slowest_stage']}; echo factor {e:g}", flush=True)
        runs = [train("baseline", pipeline(url, 1, args.batch), args, test),
                train(f"echo x{e:g}", pipeline(url, e, args.batch), args, test)]
    finally:
        server.terminate()
        server.wait(10)

    base, echo = runs
    print(f"\ntarget: {args.target:.0%} test accuracy (10,000 test images every {args.eval_every} steps), seed {args.seed}")
    print(f"{'run':10s} {'fresh examples':>15s} {'steps':>7s} {'seconds':>8s}")
    for r in runs:
        if r["reached"]:
            print(f"{r['name']:10s} {r['fresh_to_target']:15d} {r['steps_to_target']:7d} {r['seconds_to_target']:8.1f}")
        else:
            print(f"{r['name']:10s} {'not reached':>15s}")
    if base["reached"] and echo["reached"]:
        print(f"echo x{e:g}: {base['fresh_to_target'] / echo['fresh_to_target']:.2f}x fewer fresh examples, "
              f"{base['seconds_to_target'] / echo['seconds_to_target']:.2f}x less time (R = {prof['r']:.2f})")
    result = {"args": vars(args), "profile": {k: v for k, v in prof.items() if k != "stages"},
              "echo_factor": e, "runs": runs}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out / 'results.json'}")


if __name__ == "__main__":
    main()
