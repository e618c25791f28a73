"""The configs and the lines of experiments/protocol/adaptive_buffer.sh (why adaptive echo
settles above R at R about 2).

  python3 -m experiments.protocol.adaptive_buffer configs RESULT BASE_URL DIR
      from the committed adaptive cell's run (RESULT, its result.json): its trainer
      config without evaluation or target, its shards at BASE_URL, as DIR/<name>.json
      for adaptive_b8, adaptive_b64, adaptive_b512 (the echo's queue of fresh elements
      at 8, 64 and 512), adaptive_default (the echo as the cell has it) and baseline
      (no echo).
  python3 -m experiments.protocol.adaptive_buffer line SUMMARY NAME
      one run's line: raw reads per second after start-up, the echo factor reached,
      waiting and compute time, R.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from typing import Sequence

from .. import runfiles, specs
from ..runfiles import Json

BUFFERS = (8, 64, 512)
SUMMARY_FIELDS = ("train_seconds", "startup_seconds", "raw_reads", "achieved_echo", "wait_seconds",
                  "compute_seconds", "steps", "r_estimate")


def write_configs(result_path: str, base_url: str, out_dir: str) -> None:
    """The configs of the runs (the module's docstring) in out_dir."""
    c: Json = runfiles.value_at(runfiles.read_json(result_path), "config", result_path)
    c.update(eval_at_end=False, eval_every=0, eval_every_fresh=0)
    c.pop("target_accuracy", None)
    spec = copy.deepcopy(runfiles.value_at(c, "train_spec", result_path))
    src = spec["source"]
    src["uri"] = re.sub(r"^http://[^/]+", base_url, src["uri"])
    d = specs.load_spec(spec)
    variants = {f"adaptive_b{b}": specs.with_each(d, "echo", "buffer", b) for b in BUFFERS}
    variants["adaptive_default"] = d
    variants["baseline"] = d.without("echo")
    for name, v in variants.items():
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump({**c, "train_spec": v.to_spec()}, f, indent=1)


def summary_line(summary_path: str, name: str) -> str:
    """One run's line (the module's docstring)."""
    d = runfiles.read_json(summary_path, SUMMARY_FIELDS)
    t = d["train_seconds"] - d["startup_seconds"]
    return (f"{name:<16} raw reads/s {d['raw_reads'] / t:.0f} (raw reads {d['raw_reads']} over "
            f"{t:.1f} s after start-up) achieved echo {d['achieved_echo']:.2f} wait {d['wait_seconds']:.1f} s "
            f"compute {d['compute_seconds']:.1f} s ({1000 * d['compute_seconds'] / d['steps']:.1f} ms/step) "
            f"R {d['r_estimate']:.2f}")


def main(argv: Sequence[str]) -> int:
    """The command line (the module's docstring)."""
    try:
        if len(argv) == 4 and argv[0] == "configs":
            write_configs(argv[1], argv[2], argv[3])
            return 0
        if len(argv) == 3 and argv[0] == "line":
            print(summary_line(argv[1], argv[2]))
            return 0
    except (runfiles.RunFileError, ValueError) as e:
        print(f"adaptive_buffer: {e}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
