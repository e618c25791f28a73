"""The lines of experiments/lm/pilot.sh: per pilot run, the passes over the training
prefix, the validation loss (bits per byte) at every quarter of the budget, the best one
and where it was, and the late swing of the validation loss.

  python3 -m experiments.lm.pilot TRAIN_GZ ENTRIES RUN_DIR...
"""

from __future__ import annotations

import gzip
import json
import sys
from typing import List, Sequence

from .. import runfiles, stats
from ..runfiles import Json

TOKENS_PER_BLOCK = 65  # the model's context: 64 bytes and the next
BLOCKS_PER_STEP = 16


def prefix_blocks(path: str, entries: int) -> tuple[int, float]:
    """The byte tokens of the first ``entries`` entries of the split's training file (each
    entry's bytes and its end-of-sequence id), and the blocks of 65 they make."""
    tokens = 0
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i == entries:
                break
            tokens += len(json.loads(line)["text"].encode()) + 1
    return tokens, tokens / TOKENS_PER_BLOCK


def run_lines(run_dir: str, blocks: float) -> List[str]:
    """One pilot run's two lines."""
    s = runfiles.read_json(f"{run_dir}/summary.json", ("steps", "fresh", "train_seconds"))
    ev: List[Json] = runfiles.read_evals(f"{run_dir}/evals.jsonl", ("step", "loss", "bits_per_byte"))
    if not ev:
        raise runfiles.RunFileError(f"{run_dir}/evals.jsonl: no evaluations")
    n = len(ev)
    q = [ev[min(n - 1, max(0, round(n * k / 4) - 1))] for k in (1, 2, 3, 4)]
    best = min(ev, key=lambda e: e["loss"])
    late = [e["loss"] for e in ev if e["step"] >= s["steps"] / 2]
    swing = stats.swing([b - a for a, b in zip(late, late[1:])])
    # Passes from the tokens trained on (16 blocks of 65 a step), whatever the fresh count's
    # unit (blocks before 2026-12-03's sequence count, dictionary entries since).
    return [f"{run_dir}: {s['steps']} steps, {s['steps'] * BLOCKS_PER_STEP / blocks:.1f} passes, "
            f"{s['fresh']} fresh, {s['train_seconds']:.0f} s training",
            "   bits/byte at 1/4, 1/2, 3/4, end: "
            + ", ".join(f"{e['bits_per_byte']:.3f} (step {e['step']})" for e in q)
            + f"; best {best['bits_per_byte']:.3f} at step {best['step']}; "
            f"late swing of the loss {float('nan') if swing is None else swing:.4f} nats"]


def main(argv: Sequence[str]) -> int:
    """Prints the prefix's size and each run's lines."""
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    tokens, blocks = prefix_blocks(argv[0], int(argv[1]))
    print(f"prefix: {argv[1]} entries, {tokens} tokens, about {blocks:.0f} blocks of 65 per pass")
    try:
        for d in argv[2:]:
            print("\n".join(run_lines(d, blocks)))
    except runfiles.RunFileError as e:
        print(f"pilot: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
