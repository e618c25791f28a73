"""dataecho: an input pipeline with data echoing, for PyTorch training loops.

Data echoing (Choi et al., 2019) repeats the output of an earlier pipeline stage while
the next fresh element is still being read or decoded, so that an input-bound training
step does not wait. The model then reaches its target after reading fewer fresh
examples. This package is dataecho's C++ engine seen from Python: the same builder,
the same JSON specs, the same stats, with batches as torch tensors over the engine's own
buffers (no copy)::

    import dataecho as de
    p = (de.tfrecord("shards/train-{00000..00007}-of-00008.tfrecord",
                     features={"image": "image/encoded", "label": "image/class/label"})
           .map("decode_augment", random_resized_crop=224, flip=True, normalize=True,
                parallelism=2)
           .echo(2)
           .shuffle(10_000)
           .batch(128)
           .prefetch(4)
           .build(seed=7))
    for batch in p:          # a Batch: {"image": torch.Tensor, "label": torch.Tensor}
        ...

A ``PipelineDef`` is a value: every builder method returns a new definition, so one
definition can be the start of several. ``build()`` starts a ``Pipeline``: an iterator
whose threads run in C++, without the GIL. See docs/python.md for the whole reference.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _core
from ._core import DataError, Error, SpecError

__version__: str = _core.__version__

__all__ = [
    "Batch",
    "DataError",
    "Error",
    "Pipeline",
    "PipelineDef",
    "SpecError",
    "TorchIterable",
    "idx",
    "profile",
    "range",
    "source",
    "tar",
    "tfrecord",
]

_builtin_range = range
Uris = Union[str, Sequence[str]]


class Batch(dict):
    """One element of a pipeline: a dict {field name: tensor} with its provenance.

    ``ids``, ``echo`` and ``epochs`` have one entry per row (one for an unbatched
    example): the row's source id, its echo index (0 for a fresh row, k for the k-th
    repeat made by an echo stage) and the pass over the source that read it.
    ``addresses`` gives each field's data address in the engine (equal to the tensor's
    ``data_ptr()`` when it was handed over without a copy).
    """

    __slots__ = ("ids", "echo", "epochs", "addresses")

    ids: List[int]
    echo: List[int]
    epochs: List[int]
    addresses: Dict[str, int]

    @property
    def fresh_rows(self) -> int:
        """Rows whose echo index is 0 (read from the source, not repeated)."""
        return sum(1 for e in self.echo if e == 0)


class _Callable:
    """A Python function registered with the engine for as long as a definition uses it."""

    def __init__(self, fn: Callable[..., Any], as_numpy: bool):
        self.fn = fn
        self.name = getattr(fn, "__qualname__", None) or repr(fn)
        self.id = _core.register_callable(_wrap_callable(fn, as_numpy), self.name)

    def __del__(self) -> None:
        try:
            _core.unregister_callable(self.id)
        except Exception:  # interpreter shutdown
            pass


def _to_numpy(value: Any) -> Any:
    import numpy as np

    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        return value.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(value)


def _wrap_callable(fn: Callable[..., Any], as_numpy: bool) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    # The engine passes {field: DLPack capsule or numpy array} and takes {field: array}.
    def call(fields: Dict[str, Any]) -> Dict[str, Any]:
        if not as_numpy:
            from torch.utils.dlpack import from_dlpack

            fields = {k: from_dlpack(v) for k, v in fields.items()}
        out = fn(fields)
        if not isinstance(out, Mapping):
            raise TypeError(
                f"map function {getattr(fn, '__qualname__', fn)!r} returned "
                f"{type(out).__name__}, expected a dict {{field: tensor or array}}"
            )
        return {str(k): _to_numpy(v) for k, v in out.items()}

    return call


def _none_dropped(d: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _distributed_rank_and_world() -> "tuple[int, int]":
    """torch.distributed's rank and world size, else torchrun's RANK and WORLD_SIZE."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None:
        raise SpecError("distributed: torch.distributed is not initialized and RANK / WORLD_SIZE "
                        "are not set: pass rank= and world_size=")
    try:
        return int(rank), int(world)
    except ValueError:
        raise SpecError(f"distributed: RANK={rank!r}, WORLD_SIZE={world!r}: expected integers") from None


class PipelineDef:
    """A pipeline as a value: a source and its stages, the same as a JSON spec.

    Made by a source function (``de.tfrecord(...)``, ``de.range(...)``) or from a spec
    (``PipelineDef.from_spec``). Every stage method returns a new definition. The names
    and options are those of the C++ builder (dataecho/spec/pipeline_def.h) and of the
    JSON spec (README.md, "A pipeline in one JSON document"); every option is checked
    when the pipeline is built, and a wrong one raises ``SpecError`` naming its JSON path (``$.stages[2].size``).
    """

    def __init__(self, kind: str, **options: Any):
        self._spec: Dict[str, Any] = {"source": {"kind": kind, **_none_dropped(options)}, "stages": []}
        self._callables: List[_Callable] = []
        self._base_dir = ""

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_spec(cls, spec: Union[str, os.PathLike, Mapping[str, Any]]) -> "PipelineDef":
        """A definition from a JSON spec: a dict, or the path of a .json file.

        Relative paths in a file are relative to the file's folder, as with
        ``dataecho pipe``.
        """
        d = cls.__new__(cls)
        d._callables = []
        d._base_dir = ""
        if isinstance(spec, Mapping):
            d._spec = copy.deepcopy(dict(spec))
        else:
            path = os.fspath(spec)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise SpecError(f"{path}: cannot read the spec: {e.strerror}") from e
            try:
                d._spec = json.loads(text)
            except json.JSONDecodeError as e:
                raise SpecError(f"{path}: not JSON: {e}") from e
            d._base_dir = os.path.dirname(os.path.abspath(path))
        # The structure is checked now (a source with a kind, stages with an op), each
        # op's options when it is built.
        _core.canonical_spec(json.dumps(d._spec))
        return d

    def to_spec(self) -> Dict[str, Any]:
        """The JSON spec (a dict); ``json.dump`` it for ``dataecho pipe`` or the trainer.

        Raises ``SpecError`` when a stage is a Python callable, which has no JSON form.
        """
        for i, st in enumerate(self._spec.get("stages", [])):
            if st.get("fn") == "python":
                raise SpecError(
                    f"$.stages[{i}].fn: the map function is the Python callable "
                    f"{self._callable_name(st)}, which has no JSON form: register it in C++ "
                    "(dataecho::register_map_function) to use it in a spec"
                )
        return copy.deepcopy(self._spec)

    def _callable_name(self, stage: Mapping[str, Any]) -> str:
        cid = stage.get("args", {}).get("callable")
        for c in self._callables:
            if c.id == cid:
                return repr(c.name)
        return f"#{cid}"

    def _copy(self) -> "PipelineDef":
        d = copy.copy(self)
        d._spec = copy.deepcopy(self._spec)
        d._spec.setdefault("stages", [])
        d._callables = list(self._callables)
        return d

    def _with_stage(self, stage: Dict[str, Any], callable_: Optional[_Callable] = None) -> "PipelineDef":
        d = self._copy()
        d._spec["stages"].append(stage)
        if callable_:
            d._callables.append(callable_)
        return d

    # ------------------------------------------------------------------ stages
    def map(
        self,
        fn: Union[str, Callable[[Dict[str, Any]], Mapping[str, Any]]],
        *,
        parallelism: Optional[Union[int, str]] = None,
        deterministic: Optional[bool] = None,
        buffer: Optional[int] = None,
        as_numpy: bool = False,
        **args: Any,
    ) -> "PipelineDef":
        """Applies a function to every element.

        ``fn`` names a registered function ("decode_augment", "augment", "decode_image",
        "resize", "normalize", ...), whose options are the keyword arguments, or is a
        Python callable taking a dict {field: torch.Tensor} (numpy arrays with
        ``as_numpy=True``) and returning a dict {field: tensor or array}: the fields it
        returns are set, the others kept.

        Built-in functions run on ``parallelism`` threads without the GIL;
        ``parallelism="auto"`` lets the pipeline's tuner choose the count while it runs,
        within the CPU budget (``autotune``), and publish it in ``Pipeline.tuning()``. A Python
        callable runs under the GIL, one element at a time, in order: it costs the
        Python call plus a copy of what it returns, and it blocks every other Python
        thread while it runs. A pipeline with a Python callable has no JSON form.
        """
        if callable(fn):
            if parallelism not in (None, 1):
                raise SpecError("map: a Python callable runs under the GIL, one element at a time: drop parallelism")
            if args:
                raise SpecError(f"map: options {sorted(args)} are for registered functions; bind them in the callable")
            c = _Callable(fn, as_numpy)
            stage = {"op": "map", "fn": "python", "args": {"callable": c.id, "as_numpy": as_numpy}}
            return self._with_stage(_none_dropped(stage) | _none_dropped({"buffer": buffer}), c)
        stage: Dict[str, Any] = {"op": "map", "fn": fn}
        if args:
            stage["args"] = args
        stage.update(_none_dropped({"parallelism": parallelism, "deterministic": deterministic, "buffer": buffer}))
        return self._with_stage(stage)

    def filter(self, fn: str, **args: Any) -> "PipelineDef":
        """Keeps the elements a registered predicate accepts."""
        stage: Dict[str, Any] = {"op": "filter", "fn": fn}
        if args:
            stage["args"] = args
        return self._with_stage(stage)

    def interleave(
        self, cycle: int = 4, *, parallelism: Optional[Union[int, str]] = None,
        buffer_per_shard: Optional[int] = None
    ) -> "PipelineDef":
        """Reads ``cycle`` files at once, one element from each in turn (right after a
        source over several files). ``parallelism="auto"``: one thread per open file, with
        ``buffer_per_shard`` chosen by the tuner (the cycle sets the order: never tuned)."""
        return self._with_stage(
            _none_dropped({"op": "interleave", "cycle": cycle, "parallelism": parallelism,
                           "buffer_per_shard": buffer_per_shard})
        )

    def shuffle(
        self, buffer: int, *, seed: Optional[int] = None, reshuffle_each_iteration: Optional[bool] = None
    ) -> "PipelineDef":
        """Shuffles through a buffer of ``buffer`` elements. After an example echo, it
        keeps an element's copies out of the same batch."""
        return self._with_stage(
            _none_dropped({"op": "shuffle", "buffer": buffer, "seed": seed,
                           "reshuffle_each_iteration": reshuffle_each_iteration})
        )

    def echo(
        self,
        factor: Union[float, str] = 2,
        *,
        max_factor: Optional[float] = None,
        buffer: Optional[int] = None,
        buffer_bytes: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> "PipelineDef":
        """Data echoing: repeats every element ``factor`` times in all (2.5: two copies,
        a third with probability 0.5); ``"adaptive"`` repeats only while the next fresh
        element is late, at most ``max_factor`` times; ``"auto"`` is adaptive echo that
        repeats nothing until the pipeline's tuner has raised every ``"auto"``
        parallelism and buffer as far as helps and the training loop still waits: then
        it may repeat up to ``max_factor`` times (``Pipeline.tuning()`` says when).

        Where to place it (the paper's rule; ``de.profile`` measures it): right after the
        slowest stage. Before the augmentation (example echoing), each copy is augmented
        differently and a ``shuffle`` after the echo keeps copies out of one batch; after
        ``batch`` (batch echoing), whole batches repeat. Choose ``factor`` about
        R = upstream time / training-step time: more repeats than R buy no time.

        ``buffer`` and ``buffer_bytes`` (adaptive and ``"auto"`` only) bound the queue of
        fresh elements read ahead and the pool of repeat candidates, each to at most
        ``buffer`` elements (default 1024) and ``buffer_bytes`` bytes (default 16 MiB;
        0: no byte bound). A small queue makes the echo repeat while the reader stalls
        between the network's bursts, so it settles above R.
        """
        return self._with_stage(
            _none_dropped({"op": "echo", "factor": factor, "max_factor": max_factor,
                           "buffer": buffer, "buffer_bytes": buffer_bytes, "seed": seed})
        )

    def batch(self, size: int, *, drop_remainder: bool = False) -> "PipelineDef":
        """Stacks ``size`` elements into one; every tensor gets a leading batch dimension."""
        stage: Dict[str, Any] = {"op": "batch", "size": size}
        if drop_remainder:
            stage["drop_remainder"] = True
        return self._with_stage(stage)

    def prefetch(self, buffer: Union[int, str] = 2) -> "PipelineDef":
        """Runs everything before it on a thread of its own, ``buffer`` elements ahead
        (``"auto"``: sized by the tuner within the RAM budget)."""
        return self._with_stage({"op": "prefetch", "buffer": buffer})

    def repeat(self, count: int = -1) -> "PipelineDef":
        """Passes over the input ``count`` times (-1: forever); epochs are stamped on rows."""
        return self._with_stage({"op": "repeat", "count": count})

    def take(self, count: int) -> "PipelineDef":
        """The first ``count`` elements."""
        return self._with_stage({"op": "take", "count": count})

    def skip(self, count: int) -> "PipelineDef":
        """All but the first ``count`` elements."""
        return self._with_stage({"op": "skip", "count": count})

    def shard(self, num_shards: int, index: int) -> "PipelineDef":
        """One worker's share: whole files right after a source over at least
        ``num_shards`` files, else every ``num_shards``-th element from ``index``."""
        return self._with_stage({"op": "shard", "num_shards": num_shards, "index": index})

    def distributed(self, rank: Optional[int] = None, world_size: Optional[int] = None) -> "PipelineDef":
        """This process's share for data-parallel training with PyTorch's own DDP.

        Puts a ``shard`` stage first, right after the source, as ``dataecho train``
        does for its ranks (docs/distributed.md): whole files when there are at least
        ``world_size`` files, else every ``world_size``-th element. Every stage after
        it, echo included, works on this rank's stream only, so each example of an
        epoch is read by exactly one rank. ``rank`` and ``world_size`` default to
        ``torch.distributed``'s (initialized), else to the ``RANK`` and ``WORLD_SIZE``
        environment variables of torchrun. Give each rank its own ``build(seed=...)``
        (``base + rank``) so that ranks do not draw the same augmentations.
        """
        if rank is None or world_size is None:
            r, w = _distributed_rank_and_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        if not 0 <= rank < world_size:
            raise SpecError(f"distributed: rank {rank} is outside a world of {world_size}")
        for i, st in enumerate(self._spec.get("stages", [])):
            if st.get("op") == "shard":
                raise SpecError(f"$.stages[{i}]: distributed() puts its own shard stage first; "
                                "remove this one")
        d = self._copy()
        d._spec["stages"].insert(0, {"op": "shard", "num_shards": world_size, "index": rank})
        return d

    def stage(self, op: str, **options: Any) -> "PipelineDef":
        """Any registered op by its JSON options (for ops of one's own)."""
        return self._with_stage({"op": op, **options})

    def seed(self, seed: int) -> "PipelineDef":
        """The pipeline's seed: every random stage derives its own from it."""
        d = self._copy()
        d._spec["seed"] = seed
        return d

    def deterministic(self, on: bool) -> "PipelineDef":
        """The default order of parallel stages: input order (True) or as finished."""
        d = self._copy()
        d._spec["deterministic"] = on
        return d

    def autotune(self, *, cpu_budget: Optional[float] = None, ram_budget_mb: Optional[float] = None) -> "PipelineDef":
        """The budgets of the tuner that sets ``"auto"`` parallelism and buffers while the
        pipeline runs: cores (default ``$DATAECHO_CPU_BUDGET``, else all) and MiB of
        buffers (default ``$DATAECHO_RAM_BUDGET_MB``, else 1/8 of physical memory). The
        tuner never changes what the pipeline produces."""
        d = self._copy()
        d._spec["autotune"] = _none_dropped({"cpu_budget": cpu_budget, "ram_budget_mb": ram_budget_mb})
        return d

    # ------------------------------------------------------------------ building
    def build(
        self,
        seed: Optional[int] = None,
        *,
        as_numpy: bool = False,
        base_dir: Optional[str] = None,
        fusion: bool = True,
    ) -> "Pipeline":
        """Starts the pipeline. ``seed`` overrides the definition's; ``as_numpy`` yields
        numpy arrays instead of torch tensors; ``base_dir`` is where relative paths are
        found (default: the spec file's folder, or the current directory); ``fusion=False``
        turns off the map-and-batch fusion (only to measure it)."""
        d = self if seed is None else self.seed(seed)
        return Pipeline(d, as_numpy=as_numpy, base_dir=base_dir, fusion=fusion)

    def _sharded(self, num_shards: int, index: int) -> "PipelineDef":
        # A shard stage right after the source: whole files when there are enough.
        d = self._copy()
        d._spec["stages"].insert(0, {"op": "shard", "num_shards": num_shards, "index": index})
        return d

    def _without_echo(self) -> "PipelineDef":
        d = self._copy()
        d._spec["stages"] = [s for s in d._spec["stages"] if s.get("op") != "echo"]
        return d

    def __repr__(self) -> str:
        return f"PipelineDef({json.dumps(self._spec)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PipelineDef):
            return NotImplemented
        return _core.canonical_spec(json.dumps(self._spec)) == _core.canonical_spec(json.dumps(other._spec))


# ---------------------------------------------------------------------- sources
def source(kind: str, **options: Any) -> PipelineDef:
    """A source of any registered kind, by its JSON options."""
    return PipelineDef(kind, **options)


def range(count: int, *, shards: Optional[int] = None) -> PipelineDef:  # noqa: A001 (the spec's name)
    """The integers 0..count-1 as field "value" (int64); ``shards`` splits them into
    that many parts, like files, for ``interleave`` and ``shard``."""
    return PipelineDef("range", count=count, shards=shards)


def tfrecord(
    uri: Uris,
    *,
    features: Optional[Mapping[str, Any]] = None,
    raw: Optional[bool] = None,
    on_error: Optional[str] = None,
    verify_crc: Optional[bool] = None,
    buffer_bytes: Optional[int] = None,
    http: Optional[Mapping[str, Any]] = None,
) -> PipelineDef:
    """TFRecord files of tf.train.Example records: paths, globs, brace ranges
    (``train-{00000..00007}.tfrecord``), http(s) URLs or ``@manifest`` files.
    ``features`` maps field names to tf.Example keys (default: image/encoded -> image,
    image/class/label -> label); ``on_error``: "fail", "skip" or "echo"."""
    return PipelineDef(
        "tfrecord", uri=uri if isinstance(uri, str) else list(uri), features=features, raw=raw,
        on_error=on_error, verify_crc=verify_crc, buffer_bytes=buffer_bytes, http=http,
    )


def tar(
    uri: Uris,
    *,
    fields: Optional[Union[Sequence[str], Mapping[str, str]]] = None,
    on_error: Optional[str] = None,
    buffer_bytes: Optional[int] = None,
    http: Optional[Mapping[str, Any]] = None,
) -> PipelineDef:
    """Tar shards in the WebDataset layout (files sharing a key make one sample); ``fields``
    lists the extensions to keep, or maps field names to extensions."""
    return PipelineDef(
        "tar", uri=uri if isinstance(uri, str) else list(uri),
        fields=fields if fields is None or isinstance(fields, Mapping) else list(fields),
        on_error=on_error, buffer_bytes=buffer_bytes, http=http,
    )


def idx(
    images: str,
    labels: Optional[str] = None,
    *,
    limit: Optional[int] = None,
    on_error: Optional[str] = None,
    buffer_bytes: Optional[int] = None,
) -> PipelineDef:
    """MNIST's IDX files (optionally gzipped), such as Debian's dataset-fashion-mnist:
    fields "image" (uint8 [28, 28]) and "label" (int64)."""
    return PipelineDef("idx", images=images, labels=labels, limit=limit, on_error=on_error,
                       buffer_bytes=buffer_bytes)


# ---------------------------------------------------------------------- the pipeline
_live: "weakref.WeakSet[Pipeline]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # join every pipeline's threads before the interpreter goes
    for p in list(_live):
        p.close()


class _ProcessLocalState(bytes):
    """A state that names Python callables by their id in this process: it restores
    here, but cannot be pickled."""

    names: str = ""

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise SpecError(
            f"the pipeline holds the Python callable(s) {self.names}: its state cannot be "
            "saved outside this process (use registered functions to resume elsewhere)"
        )

    __reduce__ = __reduce_ex__  # type: ignore[assignment]


class Pipeline:
    """A running pipeline: an iterator of ``Batch`` dicts.

    ``next()`` waits without the GIL; Ctrl-C stops it within a second and joins the
    pipeline's threads; leaving a ``with`` block, ``close()`` or dropping the last
    reference does the same. Tensors handed out stay valid after the pipeline is gone.

    Tensors are writable and never alias memory another element can see: a batch fresh
    from ``batch`` is handed over as is (no copy), a buffer the engine shares (batch
    echoing, an echoed example) is copied first, so ``x.sub_(mean)`` on one batch never
    changes its repeats.
    """

    def __init__(self, definition: PipelineDef, *, as_numpy: bool = False, base_dir: Optional[str] = None,
                 fusion: bool = True):
        self._def = definition
        self._as_numpy = as_numpy
        self._base_dir = definition._base_dir if base_dir is None else base_dir
        self._fusion = fusion
        self._from_dlpack: Optional[Callable[[Any], Any]] = None
        self._p = self._start()
        _live.add(self)

    def _start(self) -> Any:
        return _core.build(json.dumps(self._def._spec), self._base_dir, self._fusion,
                           [c.id for c in self._def._callables], self._as_numpy)

    @classmethod
    def from_spec(cls, spec: Union[str, os.PathLike, Mapping[str, Any]], *, seed: Optional[int] = None,
                  as_numpy: bool = False) -> "Pipeline":
        """Builds a pipeline from a JSON spec (a dict or a file's path)."""
        return PipelineDef.from_spec(spec).build(seed, as_numpy=as_numpy)

    @property
    def definition(self) -> PipelineDef:
        """The definition this pipeline was built from."""
        return self._def

    def to_spec(self) -> Dict[str, Any]:
        """The JSON spec of this pipeline (see ``PipelineDef.to_spec``)."""
        return self._def.to_spec()

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        r = self._p.next()
        if r is None:
            raise StopIteration
        fields, ids, echo, epochs, addresses = r
        b = Batch()
        if self._as_numpy:
            b.update(fields)
        else:
            if self._from_dlpack is None:
                from torch.utils.dlpack import from_dlpack

                self._from_dlpack = from_dlpack
            conv = self._from_dlpack
            for k, v in fields.items():
                b[k] = conv(v)
        b.ids = ids
        b.echo = echo
        b.epochs = epochs
        b.addresses = addresses
        return b

    def stats(self) -> Dict[str, Dict[str, Any]]:
        """The per-stage table, as ``dataecho pipe --stats-json`` writes it, keyed by
        node label ("0:tfrecord", "3:echo"): elements, rows, bytes, busy_ms,
        wait_input_ms, wait_output_ms, next_ms, elements_per_s, and each node's counters
        (an echo node's "fresh" and "echoed" rows, a batch's "duplicate_rows"...)."""
        return {n["name"]: n for n in json.loads(self._p.stats_json())}

    def tuning(self) -> Dict[str, Any]:
        """What the tuner of ``"auto"`` settings chose: ``cpu_budget``, ``ram_budget_mb``,
        ``knobs`` (node, param, value, min, max) and ``changes`` (t_s, node, param, from,
        to, reason). ``knobs`` is empty when no stage has an ``"auto"`` setting."""
        return dict(json.loads(self._p.tuning_json()))

    @property
    def elements_returned(self) -> int:
        """Elements handed out so far."""
        return int(self._p.elements_returned())

    def state_dict(self) -> Dict[str, Any]:
        """The position after the elements handed out so far (torchdata's
        StatefulDataLoader convention): ``load_state_dict`` on a pipeline built from the
        same definition continues with exactly the same elements. It pickles, unless the
        pipeline holds a Python callable."""
        raw = self._p.save()
        if self._def._callables:
            state = _ProcessLocalState(raw)
            state.names = ", ".join(repr(c.name) for c in self._def._callables)
        else:
            state = raw
        return {"format": "dataecho.state/1", "elements": self.elements_returned, "state": state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from a ``state_dict()``: the next element is the one that followed."""
        if state.get("format") != "dataecho.state/1" or not isinstance(state.get("state"), (bytes, bytearray)):
            raise SpecError("load_state_dict: not a dataecho state (expected the dict state_dict() returns)")
        if self._p.elements_returned() > 0 or self._p.closed:
            self._p.close()
            self._p = self._start()
        self._p.restore(bytes(state["state"]))

    def close(self) -> None:
        """Cancels the pipeline and joins its threads (idempotent)."""
        p = getattr(self, "_p", None)
        if p is not None:
            p.close()

    @property
    def closed(self) -> bool:
        return bool(self._p.closed)

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


# ---------------------------------------------------------------------- profile
def profile(
    pipeline: Union[PipelineDef, Pipeline],
    step_fn: Callable[[Batch], Any],
    *,
    seconds: float = 5.0,
    batches: int = 0,
    warmup_steps: int = 3,
    train_steps: int = 20,
    strip_echo: bool = True,
) -> Dict[str, Any]:
    """The practitioner's first step in the paper: is the input the bottleneck, and how
    much echo does it need?

    Runs the pipeline alone (without its echo stages when ``strip_echo``) for
    ``seconds`` (or ``batches`` batches), then times ``step_fn`` (your training step,
    taking one batch) on its first batch. Returns the milliseconds per batch of both,
    R = upstream / downstream, the slowest stage, the recommended echo factor (about R;
    1 when R <= 1.1) and where to place it, with the per-stage stats (each stage's
    ``ms_per_element``, ``wall_share`` of the pipeline's time, and ``bottleneck``), and
    ``recommendations``: what to change, most effective first, with the measured numbers
    (more parallelism at the bottleneck, a prefetch at the end, echo about R). The same
    advice ``dataecho profile`` gives for the built-in models.
    """
    d = pipeline.definition if isinstance(pipeline, Pipeline) else pipeline
    if strip_echo:
        d = d._without_echo()
    with d.build() as p:
        t0 = time.perf_counter()
        first = next(p, None)
        if first is None:
            raise SpecError("profile: the pipeline yielded no element")
        t_first = time.perf_counter()
        n, t_end = 1, t_first
        while (batches <= 0 or n < batches) and time.perf_counter() - t0 < seconds:
            b = next(p, None)
            if b is None:
                break
            n += 1
            t_end = time.perf_counter()
        stats_json = p._p.stats_json()
    upstream_ms = (t_end - t_first) * 1e3 / (n - 1) if n > 1 else (t_first - t0) * 1e3
    for _ in _builtin_range(warmup_steps):
        step_fn(first)
    steps = max(1, train_steps)
    s0 = time.perf_counter()
    for _ in _builtin_range(steps):
        step_fn(first)
    downstream_ms = (time.perf_counter() - s0) * 1e3 / steps
    spec = "" if d._callables else json.dumps(d._spec)
    out: Dict[str, Any] = json.loads(_core.advise(stats_json, spec, n, upstream_ms, downstream_ms))
    out.update(batches=n, pipeline_seconds=t_end - t0, upstream_ms_per_batch=upstream_ms,
               downstream_ms_per_batch=downstream_ms)
    if out.get("recommended_spec") is None:
        out.pop("recommended_spec", None)
    return out


# ---------------------------------------------------------------------- torch
def _make_torch_iterable() -> type:
    import numpy as np
    import torch
    import torch.utils.data

    class TorchIterable(torch.utils.data.IterableDataset):  # type: ignore[misc]
        """A ``torch.utils.data.IterableDataset`` over a dataecho pipeline, for code that
        expects a DataLoader: ``DataLoader(de.TorchIterable(d), batch_size=None)``.

        dataecho batches and parallelizes inside the pipeline, so ``num_workers=0`` is
        the setting to use: worker processes add a copy of every batch through shared
        memory and nothing else. With ``num_workers=N`` anyway, each worker builds its own
        pipeline after the fork (never forking live threads) and takes a share of the
        files (whole files when there are at least N, else every N-th element), so no
        example is read twice; the threads inside each worker still run in parallel.
        """

        def __init__(self, definition: Union[PipelineDef, Pipeline], *, seed: Optional[int] = None,
                     as_numpy: bool = False, provenance: bool = False):
            """``provenance=True`` adds the rows' ids and echo indices as int64 fields
            "__ids__" and "__echo__" (attributes of a Batch do not cross to the main
            process from DataLoader workers)."""
            super().__init__()
            self.definition = definition.definition if isinstance(definition, Pipeline) else definition
            self.seed = seed
            self.as_numpy = as_numpy
            self.provenance = provenance

        def __iter__(self) -> Iterator[Batch]:
            d = self.definition
            info = torch.utils.data.get_worker_info()
            if info is not None and info.num_workers > 1:
                d = d._sharded(info.num_workers, info.id)
            with d.build(self.seed, as_numpy=self.as_numpy) as p:
                for b in p:
                    if self.provenance:
                        make = np.asarray if self.as_numpy else torch.tensor
                        b["__ids__"] = make(b.ids, dtype=np.int64 if self.as_numpy else torch.int64)
                        b["__echo__"] = make(b.echo, dtype=np.int64 if self.as_numpy else torch.int64)
                    yield b

    return TorchIterable


def __getattr__(name: str) -> Any:  # TorchIterable imports torch only when first used
    if name == "TorchIterable":
        cls = _make_torch_iterable()
        globals()["TorchIterable"] = cls
        return cls
    raise AttributeError(f"module 'dataecho' has no attribute {name!r}")
