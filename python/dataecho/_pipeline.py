"""Pipeline (a running pipeline, an iterator of Batch dicts) and Batch."""

from __future__ import annotations

import atexit
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _core
from ._core import SpecError

if TYPE_CHECKING:
    import os

    from ._definition import PipelineDef


def clear_tuner_memory() -> None:
    """Forgets what the tuners of ``"auto"`` settings learned in this process: pipelines
    built afterwards tune from their spec's values, with a warm-up. (By default a
    pipeline starts from what the last pipeline of the same definition chose; see
    ``PipelineDef.autotune(remember=...)``.)"""
    _core.clear_tuner_memory()


class Batch(Dict[str, Any]):
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


_STATE_FORMAT = "dataecho.state/1"  # the dict state_dict() returns


def _in_python_terms(e: _core.Error, message: str) -> _core.Error:
    """The engine's error `e` with `message`, which names the package's functions where the
    engine's message names C++ ones (merge_elastic_states: ``dataecho.merge_states``)."""
    error = type(e)(message.replace("merge_elastic_states", "dataecho.merge_states"))
    error.code, error.stage, error.input = e.code, e.stage, e.input
    return error


def merge_states(states: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """One state of an elastic pipeline's ranks: the ``state_dict()`` of every rank, saved
    after the same step of the same epoch, in any order, merged into one that each rank of
    any world size dividing the lanes restores with ``load_state_dict`` (docs/python.md,
    "Elastic resumption"). A state holds each lane's position and buffers, and the merge
    takes each lane from the rank that read it, so nothing is lost or read twice.

    With PyTorch's DDP, gather the dicts on every rank, merge, and save the merged one in
    the checkpoint::

        states = [None] * dist.get_world_size()
        dist.all_gather_object(states, pipeline.state_dict())
        if dist.get_rank() == 0:
            torch.save({"model": model.state_dict(), "data": dataecho.merge_states(states)}, path)
        # on resume, on any world size dividing the lanes, every rank:
        pipeline.load_state_dict(torch.load(path)["data"])

    Raises ``SpecError`` naming what is wrong: states of different pipelines (another seed
    or spec), of different epochs or steps, a lane in two states, lanes in none (a rank's
    state left out), or a state that is not an elastic pipeline's.
    """
    if not states:
        raise SpecError("merge_states: no states to merge (give the state_dict() of every rank)")
    for i, st in enumerate(states):
        if not isinstance(st, Mapping) or st.get("format") != _STATE_FORMAT or \
                not isinstance(st.get("state"), (bytes, bytearray)):
            raise SpecError(f"merge_states: state {i} is not a state_dict() of a dataecho pipeline")
        epoch, first = st.get("epoch", 0), states[0].get("epoch", 0)
        if epoch != first:
            raise SpecError(f"merge_states: state {i} is at epoch {epoch} and state 0 at epoch {first}: save every "
                            "rank at the same step")
    try:
        merged = _core.merge_elastic_states([bytes(st["state"]) for st in states])
    except _core.Error as e:  # the engine's refusal, named as this function's
        raise _in_python_terms(e, "merge_states: " + str(e).removeprefix("merge_elastic_states: ")) from None
    local = [st["state"] for st in states if isinstance(st["state"], _ProcessLocalState)]
    state: bytes = merged
    if local:  # a Python callable's state restores in this process only
        state = _ProcessLocalState(merged)
        state.names = local[0].names
    return {"format": _STATE_FORMAT, "elements": states[0].get("elements", 0), "epoch": states[0].get("epoch", 0),
            "state": state}


class Pipeline:
    """A running pipeline: an iterator of ``Batch`` dicts.

    ``next()`` waits without the GIL; Ctrl-C stops it within a second and joins the
    pipeline's threads; leaving a ``with`` block, ``close()`` or dropping the last
    reference does the same. Tensors handed out stay valid after the pipeline is gone.

    By default tensors are writable and never alias memory another element can see: a
    batch fresh from ``batch`` is handed over as is (no copy), a buffer the engine shares
    (batch echoing, an echoed example) is copied first, so ``x.sub_(mean)`` on one batch
    never changes its repeats. ``build(share_buffers=True)`` skips that copy.

    Epochs: a pipeline is one pass over its data (``repeat`` aside). Once it is
    exhausted, iterating it again (``for b in p:`` a second time) starts the next epoch,
    whose shuffles and augmentations draw anew from (seed, epoch)
    (``PipelineDef.for_epoch``); ``set_epoch(k)`` starts epoch k. The epoch is part of
    ``state_dict()``. Over a service source (``distribute``) epoch k reads the job's
    epoch k from the service's workers.
    """

    def __init__(self, definition: "PipelineDef", *, as_numpy: bool = False, base_dir: Optional[str] = None,
                 fusion: bool = True, share_buffers: bool = False, epoch: int = 0):
        self._def = definition
        self._as_numpy = as_numpy
        self._base_dir = definition._base_dir if base_dir is None else base_dir
        self._fusion = fusion
        self._share = share_buffers
        self._from_dlpack: Optional[Callable[[Any], Any]] = None
        self._epoch = epoch
        self._exhausted = False
        self._p = self._start()
        _live.add(self)

    def _start(self) -> _core.Pipeline:
        d = self._def.for_epoch(self._epoch)
        return d._d.build(self._base_dir, self._fusion, self._as_numpy, self._share)

    @property
    def epoch(self) -> int:
        """The epoch this pipeline is in (0 first)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch ``epoch`` from its beginning (as ``DistributedSampler.set_epoch``
        does for a sampler): a no-op at the start of that epoch, else the pipeline is
        rebuilt."""
        if epoch < 0:
            raise SpecError(f"set_epoch: expected an epoch >= 0, got {epoch}")
        if epoch == self._epoch and not self._exhausted and self._p.elements_returned() == 0 and not self._p.closed:
            return
        self._p.close()
        self._epoch = epoch
        self._exhausted = False
        self._p = self._start()

    @classmethod
    def from_spec(cls, spec: Union[str, "os.PathLike[str]", Mapping[str, Any]], *, seed: Optional[int] = None,
                  as_numpy: bool = False) -> "Pipeline":
        """Builds a pipeline from a JSON spec (a dict or a file's path)."""
        from ._definition import PipelineDef

        return PipelineDef.from_spec(spec).build(seed, as_numpy=as_numpy)

    @property
    def definition(self) -> "PipelineDef":
        """The definition this pipeline was built from."""
        return self._def

    def to_spec(self) -> Dict[str, Any]:
        """The JSON spec of this pipeline (see ``PipelineDef.to_spec``)."""
        return self._def.to_spec()

    def __iter__(self) -> Iterator[Batch]:
        if self._exhausted:
            self.set_epoch(self._epoch + 1)
        return self

    def __next__(self) -> Batch:
        if self._exhausted:
            raise StopIteration
        r = self._p.next()
        if r is None:
            self._exhausted = not self._p.closed
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
        return {n["name"]: n for n in self._p.stats()}

    def tuning(self) -> Dict[str, Any]:
        """What the tuner of ``"auto"`` settings chose: ``cpu_budget``, ``ram_budget_mb``,
        ``knobs`` (node, param, value, min, max) and ``changes`` (t_s, node, param, from,
        to, reason). ``knobs`` is empty when no stage has an ``"auto"`` setting.
        ``remember`` (the definition's setting), ``resumed`` and ``resumed_from``
        (``"memory"``: it started from what an earlier pipeline of the same definition
        chose; ``"state"``: from a restored ``state_dict``; ``None``), ``elapsed_s`` (the
        tuner's time, carried over from what it resumed) and ``windows``."""
        return dict(self._p.tuning())

    @property
    def elements_returned(self) -> int:
        """Elements handed out so far."""
        return int(self._p.elements_returned())

    def state_dict(self) -> Dict[str, Any]:
        """The position after the elements handed out so far (torchdata's
        StatefulDataLoader convention): ``load_state_dict`` on a pipeline built from the
        same definition continues with exactly the same elements. It carries what the
        tuner of ``"auto"`` settings learned, which the restored pipeline's tuner goes on
        from (unless built with ``autotune(remember=False)``). It pickles, unless the
        pipeline holds a Python callable."""
        raw = self._p.save()
        state: bytes = raw
        if self._def._callables:
            local = _ProcessLocalState(raw)
            local.names = ", ".join(repr(c.name) for c in self._def._callables)
            state = local
        return {"format": _STATE_FORMAT, "elements": self.elements_returned, "epoch": self._epoch,
                "state": state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from a ``state_dict()``: the same epoch, and the next element is the
        one that followed."""
        if state.get("format") != _STATE_FORMAT or not isinstance(state.get("state"), (bytes, bytearray)):
            raise SpecError("load_state_dict: not a dataecho state (expected the dict state_dict() returns)")
        epoch = state.get("epoch", 0)  # states saved before epochs were in them: epoch 0
        if not isinstance(epoch, int) or epoch < 0:
            raise SpecError(f"load_state_dict: 'epoch' is {epoch!r}, expected an integer >= 0")
        if self._p.elements_returned() > 0 or self._p.closed or epoch != self._epoch or self._exhausted:
            self._p.close()
            self._epoch = epoch
            self._exhausted = False
            self._p = self._start()
        try:
            self._p.restore(bytes(state["state"]))
        except _core.Error as e:
            if "merge_elastic_states" not in str(e):
                raise
            raise _in_python_terms(e, str(e)) from None  # a rank's own state on another world size

    def close(self) -> None:
        """Cancels the pipeline and joins its threads (idempotent)."""
        p = getattr(self, "_p", None)
        if p is not None:
            p.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` ran (or the pipeline was cancelled)."""
        return bool(self._p.closed)

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
