"""profile: is the input the bottleneck, and how much echo does it need?"""

from __future__ import annotations

import builtins
import sys
import time
from typing import Any, Callable, Dict, List, Tuple, Union

from . import _core
from ._core import SpecError
from ._definition import PipelineDef
from ._pipeline import Batch, Pipeline


def _time_pipeline(
    d: PipelineDef, seconds: float, batches: int
) -> Tuple[Batch, int, float, float, float, List[Dict[str, Any]]]:
    with d.build() as p:
        t0 = time.perf_counter()
        first = next(p, None)
        if first is None:
            raise SpecError("profile: the pipeline yielded no element")
        t_first = time.perf_counter()
        n, t_end = 1, t_first
        while (batches <= 0 or n < batches) and time.perf_counter() - t0 < seconds:
            if next(p, None) is None:
                break
            n += 1
            t_end = time.perf_counter()
        return first, n, t0, t_first, t_end, p._p.stats()


def _say(on: bool, line: str) -> None:
    if on:
        print("profile: " + line, file=sys.stderr, flush=True)


def profile(pipeline: Union[PipelineDef, Pipeline], step_fn: Callable[[Batch], Any], *, seconds: float = 5.0,
            batches: int = 0, warmup_steps: int = 3, train_steps: int = 20, strip_echo: bool = True,
            progress: bool = True) -> Dict[str, Any]:
    """The practitioner's first step in the paper: is the input the bottleneck, and how
    much echo does it need?

    Runs the pipeline alone (without its echo stages when ``strip_echo``) for
    ``seconds`` (or ``batches`` batches), then times ``step_fn`` (your training step,
    taking one batch) on its first batch. Returns the milliseconds per batch of both,
    R = upstream / downstream, the slowest stage, the recommended echo factor (about R;
    1 when R <= 1.1; never above 6, the largest factor the committed experiments show to
    pay: beyond it ``factor_capped`` is True and the pipeline's own fixes come first) and
    where to place it, with the per-stage stats (each stage's
    ``ms_per_element``, ``wall_share`` of the pipeline's time, and ``bottleneck``), and
    ``recommendations``: what to change, most effective first, with the measured numbers
    (more parallelism at the bottleneck, a prefetch at the end, echo about R). The same
    advice ``dataecho profile`` gives for the built-in models. Any pipeline and step
    work: images, text, a language model's token blocks.

    ``progress``: what it is doing, a line at a time on standard error, as ``dataecho
    profile`` says it (each phase, and train steps slower than a second).
    """
    d = pipeline.definition if isinstance(pipeline, Pipeline) else pipeline
    if strip_echo and d.count("echo") > 0:
        _say(progress, f"removed {d.count('echo')} echo stage(s) to measure the pipeline without echo")
        d = d.without("echo")
    _say(progress, f"running the pipeline alone for up to {seconds:g} s"
         + (f" or {batches} batches" if batches > 0 else ""))
    first, n, t0, t_first, t_end, stats = _time_pipeline(d, seconds, batches)
    upstream_ms = (t_end - t_first) * 1e3 / (n - 1) if n > 1 else (t_first - t0) * 1e3
    _say(progress, f"pipeline alone: {n} batches in {t_end - t0:.2f} s ({upstream_ms:.2f} ms per batch)")
    steps = max(1, train_steps)
    _say(progress, f"timing the train step ({warmup_steps} warm-up + {steps} steps)")
    said = time.perf_counter()

    def step(what: str) -> float:
        nonlocal said
        s0 = time.perf_counter()
        step_fn(first)
        s1 = time.perf_counter()
        if s1 - said > 1.0:
            _say(progress, f"{what}: {s1 - s0:.2f} s")
            said = s1
        return s1 - s0

    for i in builtins.range(warmup_steps):
        step(f"warm-up step {i + 1}/{warmup_steps}")
    downstream_ms = sum(step(f"step {i + 1}/{steps}") for i in builtins.range(steps)) * 1e3 / steps
    _say(progress, f"train step: {downstream_ms:.2f} ms per batch; R = {upstream_ms / downstream_ms:.2f}")
    # A definition with a Python callable has no spec to recommend an edit of.
    out: Dict[str, Any] = _core.advise(stats, None if d._callables else d._d, n, upstream_ms, downstream_ms)
    out.update(batches=n, pipeline_seconds=t_end - t0, upstream_ms_per_batch=upstream_ms,
               downstream_ms_per_batch=downstream_ms)
    if out.get("recommended_spec") is None:
        out.pop("recommended_spec", None)
    return out
