"""PipelineDef and the source functions: the package's face of the C++ builder.

A ``PipelineDef`` wraps the C++ ``dataecho::PipelineDef`` (``_core.PipelineDef``): every
stage method hands its arguments to the C++ ``declared_stage``, which writes the stage by
the op's declared options (docs/spec.md) and returns a new definition, so Python and C++
build, edit and validate pipelines with one piece of code. Most stage methods and source
functions are written from the declarations themselves (``_declared``, by
scripts/gen_spec.py); here are those with a Python form of their own (``map`` takes a
callable, ``pack`` its ``reads``, ``sample`` definitions) and everything else.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core, _spec_options
from ._core import SpecError
from ._declared import DeclaredStages, files, idx, range, service, tar, text, tfrecord
from ._option_text import option_line
from ._pipeline import Pipeline

__all__ = ["PipelineDef", "class_to_idx", "declared_source", "files", "idx", "range", "sample", "service", "source",
           "tar", "text", "tfrecord"]

_EPOCH_SALT = 0x65706F6368  # "epoch": mixed into the seed with the epoch (for_epoch)
MapFunction = Callable[[Dict[str, Any]], Mapping[str, Any]]


class _Callable:
    """A Python function registered with the engine for as long as a definition uses it."""

    def __init__(self, fn: MapFunction, as_numpy: bool):
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
    return np.asarray(value, order="C")  # keeps a 0-d array 0-d


def _wrap_callable(fn: MapFunction, as_numpy: bool) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
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


def _spec_value(v: Any) -> Any:
    """A Python argument as the spec's JSON takes it: a path as a string, a mapping as a
    dict, a tuple or other sequence as a list, a definition as its spec."""
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, PipelineDef):  # a nested pipeline (a service source's upstream)
        return v.to_spec()
    if isinstance(v, Mapping):
        return {str(k): _spec_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_spec_value(x) for x in v]
    return v


def _none_dropped(d: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _distributed_rank_and_world() -> Tuple[int, int]:
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


class PipelineDef(DeclaredStages):
    """A pipeline as a value: a source and its stages, the same as a JSON spec.

    Made by a source function (``de.tfrecord(...)``, ``de.range(...)``) or from a spec
    (``PipelineDef.from_spec``). Every stage method returns a new definition. The names
    and options are those of the C++ builder (dataecho/spec/pipeline_def.h), which this
    class wraps, and of the JSON spec (README.md, "Sources and operators"; docs/api.md,
    "JSON"); every option is checked when the pipeline is built, and a wrong one raises
    ``SpecError`` naming its JSON path (``$.stages[2].size``).
    """

    __slots__ = ("_d", "_callables", "_base_dir")

    def __init__(self, kind: str, **options: Any):
        self._d = _core.PipelineDef(kind, _none_dropped(options))
        self._callables: Tuple[_Callable, ...] = ()
        self._base_dir = ""

    @classmethod
    def _wrap(cls, d: _core.PipelineDef, callables: Tuple[_Callable, ...] = (), base_dir: str = "") -> "PipelineDef":
        out = cls.__new__(cls)
        out._d, out._callables, out._base_dir = d, callables, base_dir
        return out

    def _derive(self, d: _core.PipelineDef, callable_: Optional[_Callable] = None) -> "PipelineDef":
        return PipelineDef._wrap(d, self._callables + ((callable_,) if callable_ else ()), self._base_dir)

    def _declared(self, op: str, options: Mapping[str, Any], callable_: Optional[_Callable] = None) -> "PipelineDef":
        """A stage of ``op`` from the method's own arguments, by the engine's declaration of
        its options (C++ ``PipelineDef::declared_stage``): None is "not given"."""
        given = {k: _spec_value(v) for k, v in _none_dropped(options).items() if k != "self"}
        return self._derive(self._d.declared_stage(op, given), callable_)

    def _of_source(self, kind: str, taken: str, options: Mapping[str, Any]) -> "PipelineDef":
        """A source of ``kind`` whose option ``taken`` is this definition's spec, with the
        method's other arguments as its options (``distribute``: a service source)."""
        method = {"service": "distribute"}.get(kind, kind)
        if not self._d.source_kind:
            raise SpecError(f"{method}: the pipeline has no source: start it from a source "
                            "(de.tfrecord(...), de.range(...)) before distributing it")
        if self._d.source_kind == kind:
            raise SpecError(f"{method}: the pipeline's source is a {kind} source already: add the trainer's "
                            f"stages to it, or {method} its upstream instead (its source's '{taken}')")
        try:
            upstream = self.to_spec()
        except SpecError as e:
            raise SpecError(f"{method}: the workers build the upstream from its JSON spec, which it does not "
                            f"have: {e}") from None
        given = {k: v for k, v in options.items() if k != "self" and v is not None}
        out = declared_source(kind, {**given, taken: upstream})
        out._base_dir = self._base_dir  # the trainer's relative paths (a token_file)
        return out

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_spec(cls, spec: Union[str, "os.PathLike[str]", Mapping[str, Any]]) -> "PipelineDef":
        """A definition from a JSON spec: a dict, or the path of a .json file.

        The structure is checked now (a source with a kind, stages with an op), each
        op's options when it is built. Relative paths in a file are relative to the
        file's folder, as with ``dataecho pipe``.
        """
        if isinstance(spec, Mapping):
            return cls._wrap(_core.PipelineDef.from_json(dict(spec)))
        path = os.fspath(spec)
        return cls._wrap(_core.PipelineDef.from_file(path), base_dir=os.path.dirname(os.path.abspath(path)))

    def to_spec(self) -> Dict[str, Any]:
        """The JSON spec (a dict); ``json.dump`` it for ``dataecho pipe`` or the trainer.

        Raises ``SpecError`` when a stage is a Python callable, which has no JSON form.
        """
        for i, st in enumerate(self._d.stages):
            if st.get("fn") == "python":
                raise SpecError(
                    f"$.stages[{i}].fn: the map function is the Python callable "
                    f"{self._callable_name(st)}, which has no JSON form: register it in C++ "
                    "(dataecho::register_map_function) to use it in a spec"
                )
        spec: Dict[str, Any] = self._d.to_json()
        return spec

    def _callable_name(self, stage: Mapping[str, Any]) -> str:
        cid = stage.get("args", {}).get("callable")
        return next((repr(c.name) for c in self._callables if c.id == cid), f"#{cid}")

    # ------------------------------------------------------------------ stages
    def map(self, fn: Union[str, MapFunction], *, parallelism: Optional[Union[int, str]] = None,
            deterministic: Optional[bool] = None, buffer: Optional[int] = None, as_numpy: bool = False,
            **args: Any) -> "PipelineDef":
        """Applies a function to every element.

        ``fn`` names a registered function ("decode_augment", "augment", "decode_image",
        "resize", "normalize", ...), whose options are the keyword arguments, or is a
        Python callable taking a dict {field: torch.Tensor} (numpy arrays with
        ``as_numpy=True``) and returning a dict {field: tensor or array}: the fields it
        returns are set, the others kept.

        Built-in functions run on ``parallelism`` threads without the GIL;
        ``parallelism="auto"`` lets the pipeline's tuner choose the count while it runs,
        within the CPU budget (``autotune``), and publish it in ``Pipeline.tuning()``. A
        Python callable runs under the GIL, one element at a time, in order: it costs the
        Python call plus a copy of what it returns, and it blocks every other Python
        thread while it runs. A pipeline with a Python callable has no JSON form.
        """
        if callable(fn):
            if parallelism not in (None, 1):
                raise SpecError("map: a Python callable runs under the GIL, one element at a time: drop parallelism")
            if args:
                raise SpecError(f"map: options {sorted(args)} are for registered functions; bind them in the callable")
            c = _Callable(fn, as_numpy)
            return self._declared("map", {"fn": "python", "args": {"callable": c.id, "as_numpy": as_numpy},
                                          "buffer": buffer}, c)
        return self._declared("map", {"fn": fn, "args": args, "parallelism": parallelism,
                                      "deterministic": deterministic, "buffer": buffer})

    def filter(self, fn: str, **args: Any) -> "PipelineDef":
        """Keeps the elements a registered predicate accepts."""
        return self._declared("filter", {"fn": fn, "args": args})

    def pack(self, length: int, *, eos_id: Optional[int] = None, pad_id: Optional[int] = None,
             drop_remainder: bool = False, reads: bool = False, field: Optional[str] = None,
             document_field: Optional[str] = None, ids_field: Optional[str] = None,
             epochs_field: Optional[str] = None, echoes_field: Optional[str] = None) -> "PipelineDef":
        """Concatenates token sequences into blocks of ``length`` tokens, separated by the
        end-of-sequence id, with the ids of the sequences in each block and a per-token
        ``document`` field for attention masks (docs/text.md). With ``reads``, also each
        sequence's epoch and echo index (fields ``epochs`` and ``echoes``): a trainer counts
        fresh sequences from them, whichever block a piece of one lands in."""
        options = dict(locals())
        if options.pop("reads"):  # the fields' default names (the engine's), unless named
            options["epochs_field"] = epochs_field or _core.PACK_READ_FIELDS[0]
            options["echoes_field"] = echoes_field or _core.PACK_READ_FIELDS[1]
        return self._declared("pack", options)

    def stage(self, op: str, **options: Any) -> "PipelineDef":
        """Any registered op by its JSON options (for ops of one's own)."""
        return self._derive(self._d.stage(op, options))

    def seed(self, seed: int) -> "PipelineDef":
        """The pipeline's seed: every random stage derives its own from it."""
        return self._derive(self._d.seed(seed))

    def deterministic(self, on: bool) -> "PipelineDef":
        """The default order of parallel stages: input order (True) or as finished."""
        return self._derive(self._d.deterministic(on))

    def autotune(
        self, *, cpu_budget: Optional[float] = None, ram_budget_mb: Optional[float] = None, remember: bool = True
    ) -> "PipelineDef":
        """The budgets of the tuner that sets ``"auto"`` parallelism and buffers while the
        pipeline runs: cores (default ``$DATAECHO_CPU_BUDGET``, else all) and MiB of
        buffers (default ``$DATAECHO_RAM_BUDGET_MB``, else 1/8 of physical memory). The
        tuner never changes what the pipeline produces.

        ``remember``: a pipeline built from this definition starts tuning from what the
        last pipeline of the same definition (seeds and budgets aside) chose in this
        process, as a loop that builds a pipeline per epoch does, and stores what it
        chooses (``clear_tuner_memory()`` forgets it all). ``False``: every pipeline starts
        from the spec's values and its tuner's warm-up."""
        return self._derive(self._d.autotune(cpu_budget, ram_budget_mb, remember))

    def memory_check(self, *, share: Optional[float] = None, limit_mb: Optional[float] = None,
                     action: str = "warn") -> "PipelineDef":
        """The check of the buffers against memory: a stage that holds many elements (a
        shuffle, a prefetch, a map's buffer) projected at its capacity from its elements'
        size, known from the spec (``decode_augment``'s crop) or measured on the first
        ones, over ``share`` of the machine's memory (default 1/8) or ``limit_mb`` MiB is
        reported once: ``action="warn"`` (the default, on standard error), ``"error"``
        (the pipeline stops with an error naming the stage) or ``"off"``."""
        return self._derive(self._d.memory_check(share, limit_mb, action))

    # ------------------------------------------------------------------ edits
    def elastic(self, lanes: int = 12, *, pieces_per_lane: Optional[int] = None, world_size: Optional[int] = None,
                rank: Optional[int] = None, seed: Optional[int] = None) -> "PipelineDef":
        """The elastic stage put first (C++ ``with_elastic_first``): the data split into
        ``lanes`` lanes of balanced pieces of the source, of which rank ``rank`` of
        ``world_size`` reads the lanes k with k mod world_size == rank; the stages before
        the batch run once per lane, and the batch's size is the global batch of all
        ranks. Every step's global batch is the same for any world size that divides
        ``lanes``, and the ranks' ``state_dict()``s merged by ``merge_states`` resume on
        any such world size (docs/python.md, "Elastic resumption"). Build every rank with
        the same seed. Refused when the pipeline has an elastic or a shard stage already.
        """
        given = _none_dropped({"lanes": lanes, "pieces_per_lane": pieces_per_lane, "world_size": world_size,
                               "rank": rank, "seed": seed})
        # The stage as its declaration writes it (types checked now, at $.stages[0]).
        declared = _core.PipelineDef(self._d.source_kind, self._d.source_options).declared_stage("elastic", given)
        first = self._d.with_elastic_first(lanes, 1 if world_size is None else world_size, 0 if rank is None else rank)
        return self._derive(first.replacing("elastic", declared.stages))

    def distributed(self, rank: Optional[int] = None, world_size: Optional[int] = None, *, elastic: bool = False,
                    lanes: int = 12) -> "PipelineDef":
        """This process's share for data-parallel training with PyTorch's own DDP.

        ``rank`` and ``world_size`` default to ``torch.distributed``'s (initialized),
        else to the ``RANK`` and ``WORLD_SIZE`` environment variables of torchrun.

        By default, a ``shard`` stage first, right after the source, as ``dataecho
        train`` does for its ranks (C++ ``with_shard_first``, docs/distributed.md):
        whole files when there are at least ``world_size`` files, else every
        ``world_size``-th element. Every stage after it, echo included, works on this
        rank's stream only, so each example of an epoch is read by exactly one rank.
        Give each rank its own ``build(seed=...)`` (``base + rank``) so that ranks do
        not draw the same augmentations. A state of such a pipeline resumes only on the
        same rank of the same world size.

        ``elastic=True``: an ``elastic`` stage first instead (``elastic()``, C++
        ``with_elastic_first``), with ``lanes`` lanes (``world_size`` must divide
        it). The batch's size is then the global batch: each rank gets its part of
        every global batch, the same rows whatever the world size. Every rank must be
        built with the **same** seed (``build(seed=run_seed)``: an elastic pipeline
        without a seed is refused); it draws the order, and the augmentations stay
        different per example through the examples' ids. The ranks' ``state_dict()``s,
        gathered (``torch.distributed.all_gather_object``) and merged by
        ``dataecho.merge_states``, resume on any world size that divides ``lanes``.
        """
        if rank is None or world_size is None:
            r, w = _distributed_rank_and_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        if not 0 <= rank < world_size:
            raise SpecError(f"distributed: rank {rank} is outside a world of {world_size}")
        if elastic:
            return self._derive(self._d.with_elastic_first(lanes, world_size, rank))
        return self.with_shard_first(world_size, rank)

    def with_shard_first(self, num_shards: int, index: int) -> "PipelineDef":
        """A ``shard`` stage put first; refused when the pipeline has a shard stage."""
        return self._derive(self._d.with_shard_first(num_shards, index))

    def with_mixed_seed(self, *salts: int) -> "PipelineDef":
        """The seed mixed with each salt in turn (a run's seed, a rank), as in C++."""
        return self._derive(self._d.with_mixed_seed(list(salts)))

    def for_epoch(self, epoch: int) -> "PipelineDef":
        """The definition of pass ``epoch`` over the data: epoch 0 is this definition,
        epoch k > 0 its seed mixed with k, so that every stage that draws from the
        pipeline's seed (shuffles, augmentations, echo) draws anew each epoch, and the
        same (seed, epoch) draws the same in any process. A stage given a ``seed=`` of
        its own draws the same in every epoch. Over a service source (``distribute``)
        epoch k also reads the job's epoch k (the source's ``epoch`` option, plus the
        one it has): the dispatcher's deal of that epoch, the workers' passes of it."""
        if epoch < 0:
            raise SpecError(f"epoch: expected an epoch >= 0, got {epoch}")
        if epoch == 0:
            return self
        d = self.with_mixed_seed(_EPOCH_SALT, epoch)
        if self._d.source_kind == "service":
            first = self._d.source_options.get("epoch", 0)
            if isinstance(first, int) and not isinstance(first, bool):  # else build() names it
                d = d._derive(d._d.with_source_option("epoch", first + epoch))
        return d

    def without(self, op: str) -> "PipelineDef":
        """Without the stages of this op (``without("echo")``: what ``profile`` runs)."""
        return self._derive(self._d.without(op))

    def replacing(self, op: str, stages: Sequence[Mapping[str, Any]]) -> "PipelineDef":
        """Each stage of this op replaced by ``stages`` (spec dicts), in place."""
        return self._derive(self._d.replacing(op, [dict(s) for s in stages]))

    def inserting(self, at: int, stages: Sequence[Mapping[str, Any]]) -> "PipelineDef":
        """``stages`` (spec dicts) inserted before stage ``at`` (the count: at the end)."""
        return self._derive(self._d.inserting(at, [dict(s) for s in stages]))

    def inserting_after(self, index: int, stages: Sequence[Mapping[str, Any]]) -> "PipelineDef":
        """``stages`` (spec dicts) inserted after stage ``index``."""
        return self._derive(self._d.inserting_after(index, [dict(s) for s in stages]))

    def with_option(self, index: int, key: str, value: Union[bool, int, float, str]) -> "PipelineDef":
        """Stage ``index`` with option ``key`` set to ``value``; checked at build."""
        return self._derive(self._d.with_option(index, key, value))

    def find(self, op: str, fn: str = "", start: int = 0) -> Optional[int]:
        """The index of the first stage at or after ``start`` with this op (and fn)."""
        return self._d.find(op, fn, start)

    def count(self, op: str) -> int:
        """How many stages have this op."""
        return self._d.count(op)

    @property
    def stages(self) -> List[Dict[str, Any]]:
        """The stages as spec dicts ([{"op": "batch", "size": 4}, ...])."""
        return list(self._d.stages)

    # ------------------------------------------------------------------ building
    def build(self, seed: Optional[int] = None, *, epoch: int = 0, as_numpy: bool = False,
              base_dir: Optional[str] = None, fusion: bool = True, share_buffers: bool = False) -> Pipeline:
        """Starts the pipeline at the beginning of ``epoch`` (``for_epoch``). ``seed``
        overrides the definition's (without one: seed 0, so that two runs are the same:
        pass a seed of the run's to vary them); ``as_numpy`` yields
        numpy arrays instead of torch tensors; ``base_dir`` is where relative paths are
        found (default: the spec file's folder, or the current directory); ``fusion=False``
        turns off the map-and-batch fusion (only to measure it). Iterating the pipeline
        again once it is exhausted starts the next epoch (``Pipeline.set_epoch``).

        ``share_buffers=True`` hands a buffer the engine shares (an echoed batch or
        example) over without the copy the default makes: numpy arrays come read-only,
        torch tensors are writable but must not be written (``x.sub_(m)`` on one batch
        would change its echoed repeats; ``x = x - m`` is fine). With
        ``DATAECHO_CHECK_SHARED=1`` in the environment, each shared buffer's checksum is
        taken when it is handed out and checked when its repeat is: a write in between
        raises ``SpecError`` naming the echo stage. See docs/python.md, "Shared buffers,
        opt in".
        """
        if seed is None and self.find("elastic") is not None and "seed" not in self._d.to_json():
            raise SpecError("elastic: the pipeline has no seed: build(seed=...) with the same seed on every rank "
                            "(every rank draws the order of the lanes from it)")
        d = self if seed is None else self.seed(seed)
        return Pipeline(d, as_numpy=as_numpy, base_dir=base_dir, fusion=fusion, share_buffers=share_buffers,
                        epoch=epoch)

    def __repr__(self) -> str:
        return f"PipelineDef({json.dumps(self._d.to_json())})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PipelineDef):
            return NotImplemented
        return bool(self._d == other._d)

    __hash__ = None  # type: ignore[assignment]


# ---------------------------------------------------------------------- sources
def source(kind: str, **options: Any) -> PipelineDef:
    """A source of any registered kind, by its JSON options."""
    return PipelineDef(kind, **options)


def declared_source(kind: str, options: Mapping[str, Any]) -> PipelineDef:
    """A source of ``kind`` from a source function's own arguments (None: not given), paths
    as strings and sequences as lists."""
    return PipelineDef(kind, **{k: _spec_value(v) for k, v in options.items()})


def sample(inputs: Sequence[PipelineDef], weights: Sequence[float], *, stop: Optional[str] = None,
           seed: Optional[int] = None, input_field: Optional[str] = None) -> PipelineDef:
    """Several pipelines interleaved by ``weights``, deterministic with ``seed``;
    ``stop``: "first" (when the first input ends), "all" or "never" (docs/formats.md);
    ``input_field``: a field to add, the index of the input each element came from.
    Each input is a definition with a JSON form (no Python callables), and all give the
    same fields (one may give extra fields)."""
    return PipelineDef("sample", inputs=[d.to_spec() for d in inputs], weights=[float(w) for w in weights],
                       stop=stop, seed=seed, input_field=input_field)


def class_to_idx(root: Union[str, "os.PathLike[str]"]) -> Dict[str, int]:
    """An ImageFolder tree's class name -> label, as torchvision's ``ImageFolder`` and the
    ``files`` source number them."""
    return dict(_core.class_to_idx(os.fspath(root)))


# ---------------------------------------------------------------------- options
def _options_text(group: str, name: str) -> str:
    """The declared options of one source, stage or function (docs/spec.md), as text."""
    lines = [option_line(*row) for row in _spec_options.OPTIONS[group].get(name, [])]
    return "\n".join(lines) if lines else "No options."


def _document_options() -> None:
    """Appends each method's and source function's declared options to its docstring, and
    to ``map``'s and ``filter``'s the functions a spec can name, from the engine's own
    declarations (``_spec_options``, written by scripts/gen_spec.py)."""
    targets = [("stages", name, getattr(PipelineDef, name, None)) for name in _spec_options.OPTIONS["stages"]]
    targets += [("sources", name, globals().get(name)) for name in _spec_options.OPTIONS["sources"]]
    for group, name, fn in targets:
        if fn is None or not fn.__doc__ or "Options (docs/spec.md" in fn.__doc__:  # -OO; or _declared's
            continue
        fn.__doc__ = (inspect.cleandoc(fn.__doc__) + "\n\nOptions (docs/spec.md, \"" + name + "\"):\n\n"
                      + _options_text(group, name))
    for method, group in ((PipelineDef.map, "map_functions"), (PipelineDef.filter, "filters")):
        if method.__doc__:
            fns = "\n\n".join(f"``{n}``: {doc}\n{_options_text(group, n)}"
                              for n, doc in sorted(_spec_options.DOCS[group].items()))
            method.__doc__ = inspect.cleandoc(method.__doc__) + "\n\nThe functions a spec can name:\n\n" + fns


_document_options()
