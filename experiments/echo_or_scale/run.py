"""The echo-or-scale comparison of docs/echo_or_scale_protocol.md, in resumable parts.

    python3 -m experiments.echo_or_scale.run PART [--dry-run]

PART:
  tune        the learning rates: e = 1, 2, 4 and 5 over 4 rates on tuning seeds 101 and
              102 (section 5), each run a data service job read from one worker whose link
              is not shaped (a dispatcher and a local worker on loopback).
  calibrate   B, the rate every worker's link is shaped to: short baseline runs with one
              worker until R is within 10% of 5 (section 5); written to calibration.json.
  grid        the 9 fixed settings (1, 2, 4 workers by e = 1, 2, 4), seeds 1-3.
  policies    workers only, echo only, and echo or scale at worker prices 0, 1 and 4, on
              the code of the protocol's change 3 (settings named ...-c3).
  registered  the same on the registered code's names (the runs before change 3; with a
              binary of that code).
  paper       the data service in the paper's setting (change 1): the grid's 1 and 2
              workers at e = 1, and 1 worker at e = 5.
  all         tune, calibrate, paper, grid and policies, in that order.
  collect     the finished runs' files (and their service records) into
              results/echo_or_scale/<setting>/runs.jsonl.xz (experiments/archive.py).

Each run of the shaped parts gets a dispatcher of its own in the trainer's network
namespace, and its workers are started by the dispatcher's launcher, each in a namespace of
its own behind a link shaped to B; the trainer runs `dataecho experiment` on a spec of one
cell and one seed. A finished run (its result.json) is never redone; an interrupted part
starts its unfinished run again. The dispatcher's status is polled every second into the
run's service folder (status.jsonl): the launches' times, from which the report charges
the workers. As root (network namespaces, tc).

Environment: DATAECHO_BIN, a frozen copy of build/bin/dataecho with dataecho-train and
libdataecho_grpc.so beside it and the commit it was built from in DATAECHO_BIN.commit
(default: build/bin/dataecho, at the checkout's commit); EOS_OUT (default
out/echo_or_scale).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from .. import runfiles

ROOT = Path(__file__).resolve().parents[2]
FASHION = Path("/usr/share/datasets/fashion-mnist")
PREFIX = "deos"
ROUTER = f"{PREFIX}-r"
TRAINER_NS = f"{PREFIX}-c"
TRAINER_ADDR = "10.234.2.2"
MAX_WORKERS = 4
PORT = 5072
TUNE_PORT = 5071
LANES = 8
R_GOAL = 5.0
TUNING = {"lr": [0.025, 0.05, 0.1, 0.2], "seeds": [101, 102], "widen": 3}
SEEDS = [1, 2, 3]
PRICES = [0, 1, 4]
CHANGE_3 = "-c3"  # the policies' settings run on the corrected code (protocol change 3)
Json = Dict[str, Any]


def worker_ns(k: int) -> str:
    return f"{PREFIX}-w{k}"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


class Paths:
    def __init__(self) -> None:
        self.out = Path(os.environ.get("EOS_OUT", ROOT / "out" / "echo_or_scale")).resolve()
        self.bin = Path(os.environ.get("DATAECHO_BIN", ROOT / "build" / "bin" / "dataecho")).resolve()
        self.plugin = self.bin.parent / "libdataecho_grpc.so"
        if not self.plugin.is_file():
            self.plugin = self.bin.parent.parent / "libdataecho_grpc.so"  # a build tree's
        self.shards = self.out / "shards"
        self.cfg = self.out / "config"
        self.runs = self.out / "runs"


def commit(paths: Paths) -> str:
    """The commit of the binary: DATAECHO_COMMIT, else DATAECHO_BIN.commit, else the
    checkout's (scripts/commit_state.sh's rule: "-dirty" when src, include or experiments
    differ from it)."""
    if os.environ.get("DATAECHO_COMMIT"):
        return os.environ["DATAECHO_COMMIT"]
    stamp = Path(str(paths.bin) + ".commit")
    if stamp.is_file():
        return stamp.read_text().strip()
    r = sh("bash", "-c", f"source {ROOT}/scripts/commit_state.sh && commit_state {ROOT} src include experiments",
           check=False)
    return r.stdout.strip() or "unknown"


def env(paths: Paths) -> Dict[str, str]:
    e = dict(os.environ)
    e["DATAECHO_GRPC_PLUGIN"] = str(paths.plugin)
    e["DATAECHO_COMMIT"] = e.get("DATAECHO_COMMIT") or commit(paths)
    return e


# ---- the data and the configs ----

def make_shards(paths: Paths) -> None:
    if (paths.shards / ".done").is_file():
        return
    print("== converting the first 50,000 Fashion-MNIST training images to 8 TFRecord shards (PNG)", flush=True)
    shutil.rmtree(paths.shards, ignore_errors=True)
    subprocess.run([str(paths.bin), "convert", "--images", str(FASHION / "train-images-idx3-ubyte.gz"),
                    "--labels", str(FASHION / "train-labels-idx1-ubyte.gz"), "--to", "tfrecord",
                    "--out", str(paths.shards), "--name", "train", "--shards", "8", "--encode", "png",
                    "--limit", "50000"],  # the first 50,000: the last 10,000 are the validation split
                   check=True)
    (paths.shards / ".done").touch()


def read_json(path: Path) -> Json:
    """A JSON object file, its errors naming the file (experiments/runfiles.py's reader)."""
    return runfiles.read_json(str(path))


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")


def train_spec(paths: Paths, dispatcher: str, scale: Optional[Json]) -> Json:
    """The trainer's side of section 2: the service source (the upstream: the shards,
    parsed and decoded, on the workers), then the stages the experiment puts the echo
    before (augment, batch 128, prefetch 4)."""
    protocol = read_json(ROOT / "experiments" / "protocol" / "train.json")
    upstream = {"source": dict(protocol["source"], uri=f"{paths.shards}/train-{{00000..00007}}-of-00008.tfrecord"),
                "stages": [{"op": "map", "fn": "decode_image"}]}
    source: Json = {"kind": "service", "dispatcher": dispatcher, "job": "eos", "pipeline": upstream,
                    "sharding": "static", "lanes": LANES, "connect_timeout_s": 60}
    if scale:
        source["scale"] = scale
    stages = [s for s in protocol["stages"] if s["op"] in ("map", "batch", "prefetch") and s.get("fn") != "decode_image"]
    return {"comment": "The echo-or-scale protocol's training pipeline (docs/echo_or_scale_protocol.md section 2), rendered by experiments/echo_or_scale/run.py.",
            "seed": 1, "source": source, "stages": [{"op": "repeat", "count": -1}] + stages}


def render_setting(paths: Paths, name: str, dispatcher: str, scale: Optional[Json], cells: List[Json],
                   seeds: List[int], tuning: Optional[Json]) -> Path:
    """config/NAME/: the base config, its train spec and the experiment spec of every cell
    and seed of the setting (what the report reads)."""
    d = paths.cfg / name
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / "train.json", train_spec(paths, dispatcher, scale))
    for f in ("validation", "test"):
        shutil.copyfile(ROOT / "experiments" / "protocol" / f"{f}.json", d / f"{f}.json")
    base = read_json(ROOT / "experiments" / "protocol" / "base.json")
    base.update({"train_spec": "train.json", "eval_spec": "validation.json", "test_spec": "test.json",
                 "eval_mode": "snapshots"})
    write_json(d / "base.json", base)
    spec: Json = {"name": f"echo-or-scale-{name}", "base": "base.json", "out": str(paths.runs / name),
                  "cells": [dict(c, seeds=seeds) for c in cells]}
    if tuning is not None:
        spec["tuning"] = tuning
    write_json(d / "experiment.json", spec)
    return d


def echo_cell(e: int) -> Json:
    return {"variant": "example_before_augmentation", "factor": e, "shuffle_after_echo": 1000}


def cell_id(e: int) -> str:
    return f"before_aug-e{e}-sb1000"


# Echo only and echo or scale: "factor": "auto" (section 3), its cap the tuner's or the policy's.
ADAPTIVE = {"variant": "adaptive", "adaptive_factor": "auto", "factor": 4, "shuffle_after_echo": 1000}
ADAPTIVE_ID = "auto-m4-sb1000"
FROM_TUNING = {"from": "../tune/experiment.json", "map": {ADAPTIVE_ID: cell_id(4)}}


def settings(paths: Paths, part: str) -> List[Json]:
    """Each setting of a shaped part: its name, the workers it starts with, its scale
    option, its cells."""
    dispatcher = f"{TRAINER_ADDR}:{PORT}"
    out: List[Json] = []
    if part in ("grid", "paper"):
        # paper: the data service's check runs the grid's 1 and 2 workers at e = 1 first.
        for n in (1, 2, 4) if part == "grid" else (1, 2):
            cells = [echo_cell(e) for e in (1, 2, 4)]
            out.append({"name": f"grid-n{n}", "workers": n, "scale": None, "cells": cells,
                        "only": cells[:1] if part == "paper" else cells})
    if part == "paper":
        out.append({"name": "paper-n1", "workers": 1, "scale": None, "cells": [echo_cell(5)]})
    elif part in ("policies", "registered"):
        code = CHANGE_3 if part == "policies" else ""
        out.append({"name": f"workers-only{code}", "workers": 1,
                    "scale": {"policy": "workers", "max_workers": MAX_WORKERS}, "cells": [echo_cell(1)]})
        out.append({"name": f"echo-only{code}", "workers": 1, "scale": None, "cells": [ADAPTIVE]})
        for p in PRICES:
            out.append({"name": f"echo-or-scale-p{p}{code}", "workers": 1,
                        "scale": {"policy": "echo_or_scale", "max_workers": MAX_WORKERS,
                                  "worker_price_per_hour": p, "trainer_price_per_hour": 1},
                        "cells": [ADAPTIVE]})
    for s in out:
        s["dir"] = render_setting(paths, s["name"], dispatcher, s["scale"], s["cells"], SEEDS, FROM_TUNING)
    return out


# ---- the namespaces ----

def link(ns: str, rend: str, addr: str) -> None:
    gw = addr.rsplit(".", 1)[0] + ".1"
    sh("ip", "netns", "add", ns)
    sh("ip", "-n", ROUTER, "link", "add", rend, "type", "veth", "peer", "name", "eth0", "netns", ns)
    sh("ip", "-n", ROUTER, "addr", "add", f"{gw}/24", "dev", rend)
    sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
    for n, dev in ((ROUTER, rend), (ns, "eth0"), (ns, "lo")):
        sh("ip", "-n", n, "link", "set", "dev", dev, "up")
    sh("ip", "-n", ns, "route", "add", "default", "via", gw)


def teardown() -> None:
    for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
        ns = line.split()[0] if line.split() else ""
        if not ns.startswith(PREFIX + "-"):
            continue
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        sh("ip", "netns", "del", ns, check=False)


def topology(rate_bit: Optional[int]) -> None:
    """R (the router), C (the dispatcher and the trainer) and W1..W4, one worker each; every
    worker's side of its link shaped to rate_bit bit/s (tbf, what it sends)."""
    teardown()
    sh("ip", "netns", "add", ROUTER)
    sh("ip", "-n", ROUTER, "link", "set", "lo", "up")
    sh("ip", "netns", "exec", ROUTER, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    link(TRAINER_NS, "r-c", TRAINER_ADDR)
    for k in range(1, MAX_WORKERS + 1):
        ns = worker_ns(k)
        link(ns, f"r-w{k}", f"10.234.{10 + k}.2")
        sh("ip", "-n", ns, "link", "set", "dev", "eth0", "gso_max_segs", "1")
        if rate_bit:
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
               "rate", f"{rate_bit}bit", "burst", "32kb", "latency", "100ms")


# ---- one run ----

def compact_status(t: float, s: Json) -> Json:
    """What a run keeps of one poll of the dispatcher's status: the launcher's target and
    why, each launch [index, host, state, age_s, ran_s or None, worker], each worker
    [worker, state, elements, bytes, rate]."""
    launch = s.get("launch") or {}
    return {"t": round(t, 3), "target": launch.get("target"), "reason": launch.get("reason", ""),
            "launched": [[l["index"], l["host"], l["state"], l["age_s"], l.get("ran_s"), l["worker"]]
                         for l in launch.get("launched", [])],
            "workers": [[w["worker"], w["state"], w["elements"], w["bytes"], w["rate"]] for w in s.get("workers", [])]}


class Service:
    """A dispatcher (in namespace ns, or this one) whose launcher starts the workers, and
    the poller that writes its status every second."""

    def __init__(self, paths: Paths, where: Path, ns: Optional[str], bind: str, port: int, hosts: bool) -> None:
        self.paths, self.where, self.addr = paths, where, f"{bind}:{port}"
        where.mkdir(parents=True, exist_ok=True)
        self.prefix = ["ip", "netns", "exec", ns] if ns else []
        cmd = self.prefix + [str(paths.bin), "dispatcher", "--port", str(port), "--bind", bind,
                             "--max-workers", str(MAX_WORKERS)]
        if hosts:
            cmd += ["--launch", "exec ip netns exec {host} {exe} worker --dispatcher {dispatcher} --threads 1",
                    "--hosts"] + [worker_ns(k) for k in range(1, MAX_WORKERS + 1)]
        self.log = open(where / "dispatcher.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env(paths))
        self.status_file = open(where / "status.jsonl", "a")

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(self.prefix + [str(self.paths.bin), "service"] + list(args),
                              capture_output=True, text=True, check=check, env=env(self.paths))

    def status(self) -> Optional[Json]:
        r = self.cli("status", self.addr, "--json", "--timeout", "5", check=False)
        if r.returncode != 0:
            return None
        s = json.loads(r.stdout)
        self.status_file.write(json.dumps(compact_status(time.time(), s)) + "\n")
        self.status_file.flush()
        return s

    def scale_to(self, n: int, timeout_s: float = 60) -> None:
        deadline = time.time() + timeout_s
        while self.cli("scale", self.addr, str(n), check=False).returncode != 0:
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"the dispatcher at {self.addr} did not answer: see {self.where}/dispatcher.log")
            time.sleep(0.3)
        while True:
            s = self.status()
            serving = [w for w in (s or {}).get("workers", []) if w.get("alive")]
            if len(serving) >= n:
                return
            if time.time() > deadline:
                raise RuntimeError(f"{n} workers did not register within {timeout_s} s: see {self.where}")
            time.sleep(0.5)

    def stop(self) -> None:
        self.status()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        self.status_file.close()


def seed_dir(setting_dir: Path, cell: str, seed: int) -> Path:
    return Path(read_json(setting_dir / "experiment.json")["out"]) / "cells" / cell / f"seed-{seed}"


def finished(setting_dir: Path, cell: str, seed: int) -> bool:
    return (seed_dir(setting_dir, cell, seed) / "result.json").is_file()


def run_one(paths: Paths, setting: Json, cell: Json, cid: str, seed: int, dry: bool) -> None:
    d: Path = setting["dir"]
    spec = read_json(d / "experiment.json")
    spec["cells"] = [dict(cell, seeds=[seed])]
    one = d / f"run-{cid}-seed{seed}.json"
    write_json(one, spec)
    if dry:
        subprocess.run([str(paths.bin), "experiment", str(one), "--dry-run"], check=True, env=env(paths))
        return
    where = paths.runs / setting["name"] / "service" / cid / f"seed-{seed}"
    shutil.rmtree(where, ignore_errors=True)
    # A run's time to target is one uninterrupted run's: an interrupted run starts over
    # rather than resuming from its checkpoint.
    shutil.rmtree(seed_dir(d, cid, seed), ignore_errors=True)
    svc = Service(paths, where, TRAINER_NS, TRAINER_ADDR, PORT, hosts=True)
    try:
        svc.scale_to(setting["workers"])
        times: Json = {"trainer_start": time.time()}
        trainer = subprocess.Popen(["ip", "netns", "exec", TRAINER_NS, str(paths.bin), "experiment", str(one),
                                    "--progress", "lines", "--no-plots"],
                                   stdout=open(where / "trainer.log", "w"), stderr=subprocess.STDOUT, env=env(paths))
        while trainer.poll() is None:
            svc.status()
            time.sleep(1)
        times["trainer_end"] = time.time()
        times["trainer_exit"] = trainer.returncode
        if finished(d, cid, seed):  # an interrupted run leaves no times.json: collect skips it
            write_json(where / "times.json", times)
    finally:
        svc.stop()


def run_settings(paths: Paths, part: str, dry: bool) -> None:
    for s in settings(paths, part):
        for cell in s.get("only", s["cells"]):
            cid = cell_id(cell["factor"]) if cell["variant"] != "adaptive" else ADAPTIVE_ID
            for seed in SEEDS:
                if finished(s["dir"], cid, seed):
                    continue
                print(f"== {part}: {s['name']} {cid} seed {seed} ({s['workers']} worker(s) at the start)", flush=True)
                run_one(paths, s, cell, cid, seed, dry)
        if not dry:
            report = subprocess.run([str(paths.bin), "experiment", str(s["dir"] / "experiment.json"), "--report-only",
                                     "--no-plots"], capture_output=True, text=True, env=env(paths))
            print(report.stdout[-2000:], flush=True)


# ---- tuning and calibration ----

def tune(paths: Paths, dry: bool) -> None:
    # The final seeds are listed (a spec needs them) but run in the shaped parts: --tune-only.
    # e = 1 and 5 first: the paper part needs them alone.
    d = render_setting(paths, "tune", f"127.0.0.1:{TUNE_PORT}", None, [echo_cell(e) for e in (1, 5, 2, 4)],
                       SEEDS, TUNING)
    if dry:
        subprocess.run([str(paths.bin), "experiment", str(d / "experiment.json"), "--dry-run"], check=True, env=env(paths))
        return
    svc = Service(paths, paths.runs / "tune" / "service", None, "127.0.0.1", TUNE_PORT, hosts=False)
    try:
        svc.scale_to(1)
        subprocess.run([str(paths.bin), "experiment", str(d / "experiment.json"), "--progress", "lines",
                        "--tune-only", "--no-plots"], check=False, env=env(paths))
    finally:
        svc.stop()


def measure_r(paths: Paths, rate_bit: int, steps: int) -> float:
    topology(rate_bit)
    d = render_setting(paths, "calibrate", f"{TRAINER_ADDR}:{PORT}", None, [echo_cell(1)], [1], None)
    where = paths.out / "calibration" / f"rate-{rate_bit}"
    shutil.rmtree(where, ignore_errors=True)
    svc = Service(paths, where / "service", TRAINER_NS, TRAINER_ADDR, PORT, hosts=True)
    try:
        svc.scale_to(1)
        lr = tuned_lr(paths, cell_id(1)) or 0.05
        subprocess.run(["ip", "netns", "exec", TRAINER_NS, str(paths.bin), "train", "--config", str(d / "base.json"),
                        "--max-steps", str(steps), "--eval-every", "0", "--eval-every-fresh", "0", "--lr", str(lr),
                        "--progress", "off", "--out", str(where / "train")],
                       check=True, env=env(paths), stdout=subprocess.DEVNULL)
    finally:
        svc.stop()
    return float(read_json(where / "train" / "summary.json")["r_estimate"])


def tuned_lr(paths: Paths, cid: str) -> Optional[float]:
    spec = paths.cfg / "tune" / "experiment.json"
    if not spec.is_file():
        return None
    r = subprocess.run([str(paths.bin), "experiment", str(spec), "--report-only", "--no-plots", "--json"],
                       capture_output=True, text=True, env=env(paths))
    if r.returncode != 0:
        return None
    return runfiles.tuned_lr(json.loads(r.stdout), cid, str(spec))


def calibrate(paths: Paths, steps: int = 300, attempts: int = 5) -> int:
    """B (bit/s): from a first guess, rate *= R / R_GOAL until R is within 10% of R_GOAL."""
    cal = paths.out / "calibration.json"
    if cal.is_file():
        return int(read_json(cal)["rate_bit"])
    rate, tried = 8_000_000, []
    for _ in range(attempts):
        r = measure_r(paths, rate, steps)
        tried.append({"rate_bit": rate, "r": r})
        print(f"== calibration: {rate} bit/s: R {r:.2f}", flush=True)
        if abs(r - R_GOAL) <= 0.1 * R_GOAL:
            write_json(cal, {"rate_bit": rate, "r": r, "steps": steps, "tried": tried, "commit": commit(paths),
                             "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "load": Path("/proc/loadavg").read_text().split()[:3],
                             "method": f"{steps}-step baseline runs with 1 worker behind its shaped link; the rate "
                                       f"times R / {R_GOAL} until R is within 10% of {R_GOAL}"})
            return rate
        rate = max(100_000, int(rate * r / R_GOAL))
    raise SystemExit(f"calibration: R did not come within 10% of {R_GOAL} in {attempts} tries: {tried}")


def collect(paths: Paths) -> None:
    """Every setting's finished runs, and the service records of each, join
    results/echo_or_scale/<setting>/runs.jsonl.xz; the calibration beside them."""
    dest_root = ROOT / "results" / "echo_or_scale"
    dest_root.mkdir(parents=True, exist_ok=True)
    for d in sorted(paths.runs.iterdir()) if paths.runs.is_dir() else []:
        if not (d / "cells").is_dir():
            continue
        dest = dest_root / d.name
        archive = [sys.executable, "-m", "experiments.archive", "collect", str(d), str(dest)]
        subprocess.run(archive, check=True, cwd=ROOT)
        if (d / "service").is_dir():
            subprocess.run(archive + ["--under", "service", "--marker", "times.json", "--files", "times.json",
                                      "status.jsonl", "dispatcher.log"], check=True, cwd=ROOT)
    if (paths.out / "calibration.json").is_file():
        shutil.copyfile(paths.out / "calibration.json", dest_root / "calibration.json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["tune", "calibrate", "grid", "policies", "registered", "paper", "all",
                                     "collect"])
    ap.add_argument("--dry-run", action="store_true", help="render the configs and check them; run nothing")
    a = ap.parse_args()
    paths = Paths()
    paths.out.mkdir(parents=True, exist_ok=True)
    make_shards(paths)
    if a.part == "collect":
        collect(paths)
        return 0
    parts = ["tune", "calibrate", "paper", "grid", "policies"] if a.part == "all" else [a.part]
    try:
        for part in parts:
            if part == "tune":
                tune(paths, a.dry_run)
            elif part == "calibrate":
                if not a.dry_run:
                    calibrate(paths)
            else:
                if not a.dry_run:
                    topology(calibrate(paths))
                run_settings(paths, part, a.dry_run)
    finally:
        if not a.dry_run:
            teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
