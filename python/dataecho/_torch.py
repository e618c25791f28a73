"""TorchIterable: a dataecho pipeline as a torch IterableDataset, and StatefulDataLoader: a
DataLoader over one whose position saves and resumes, with workers too (imports torch)."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import types
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch
import torch.utils.data

from . import _core
from ._core import SpecError
from ._definition import PipelineDef
from ._pipeline import _STATE_FORMAT, Batch, Pipeline


class _EpochCounter:
    """Which epoch each pass of a DataLoader over a TorchIterable is, agreed by the
    processes that run it: the main process (``num_workers=0``) or the DataLoader's
    workers, forked or spawned, new each pass or persistent. The state is a small JSON
    file under a lock (``flock``), so it works whatever the multiprocessing context.

    A pass's workers share DataLoader's base seed (``worker_info.seed - id``), drawn anew
    for each pass unless the workers persist; so a claim opens a new pass when its
    token (that base seed) differs from the open pass's, or when the open pass has had
    as many claims as it has workers (persistent workers claim once per pass)."""

    def __init__(self, epoch: int = 0):
        fd, self.path = tempfile.mkstemp(prefix="dataecho-epochs-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"next": epoch, "epoch": epoch, "token": None, "claims": 0}, f)
        self._owner_pid = os.getpid()
        self._finalizer = weakref.finalize(self, _remove_if_owner, self.path, self._owner_pid)

    def __getstate__(self) -> dict:
        return {"path": self.path, "_owner_pid": self._owner_pid}

    def __setstate__(self, state: dict) -> None:
        self.path = state["path"]
        self._owner_pid = state["_owner_pid"]

    def _update(self, change: Any) -> int:
        with open(self.path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                st = json.load(f)
                epoch = change(st)
                f.seek(0)
                f.truncate()
                json.dump(st, f)
                f.flush()  # written before the lock goes: the next holder reads it whole
                return epoch
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def claim(self, token: Optional[int], workers: int) -> int:
        """The epoch of the pass this caller belongs to."""

        def change(st: dict) -> int:
            if token is None or st["token"] != token or st["claims"] >= workers:
                st["epoch"], st["next"], st["token"], st["claims"] = st["next"], st["next"] + 1, token, 0
            st["claims"] += 1
            return int(st["epoch"])

        return self._update(change)

    def set(self, epoch: int) -> None:
        """The next pass is ``epoch``."""

        def change(st: dict) -> int:
            st["next"], st["token"], st["claims"] = epoch, None, 0
            return epoch

        self._update(change)

    def peek(self) -> int:
        with open(self.path) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            try:
                return int(json.load(f)["next"])
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _remove_if_owner(path: str, pid: int) -> None:
    if os.getpid() == pid:
        try:
            os.unlink(path)
        except OSError:
            pass


def _refuse_service_workers(d: PipelineDef, who: str, num_workers: int) -> None:
    """DataLoader workers over a service source: each would be a consumer of its own."""
    if d._d.source_kind == "service":
        raise SpecError(f"{who}: the pipeline's source is a service source, whose upstream runs on the service's "
                        f"workers: use num_workers=0, not {num_workers} (each DataLoader worker would be a consumer "
                        "of its own, and the job's elements would not reach the loader exactly once)")


class TorchIterable(torch.utils.data.IterableDataset):
    """A ``torch.utils.data.IterableDataset`` over a dataecho pipeline, for code that
    expects a DataLoader: ``DataLoader(de.TorchIterable(d), batch_size=None)``.

    dataecho batches and parallelizes inside the pipeline, so ``num_workers=0`` is
    the setting to use: worker processes add a copy of every batch through shared
    memory and nothing else. With ``num_workers=N`` anyway, each worker builds its own
    pipeline after the fork (never forking live threads) and takes a share of the
    files (whole files when there are at least N, else every N-th element), so no
    example is read twice; the threads inside each worker still run in parallel. In an
    elastic pipeline (``distributed(elastic=True)``, ``elastic()``) worker w of N reads
    its own lanes instead (the elastic stage's ``consumers_per_rank`` and ``consumer``):
    its batches still have the rank's share of the global batch's rows, and the workers
    together return the rank's rows of an epoch, in another order. The ranks times the
    workers must divide the lanes, and batch echo takes ``num_workers`` 0 or 1. A
    pipeline whose source is a ``service`` source (``distribute``) takes
    ``num_workers=0``: its upstream runs on the service's workers already.
    ``StatefulDataLoader`` saves and resumes the position of such a loader.

    Each pass of the DataLoader (each ``for batch in loader:``) is a new epoch: epoch
    0, 1, 2, ... (``PipelineDef.for_epoch``: its shuffles and augmentations draw anew
    from (seed, epoch)), the same in every worker of the pass, with workers or without,
    persistent or not. ``set_epoch(k)`` makes the next pass epoch k, as
    ``DistributedSampler.set_epoch`` does: call it before each epoch to tie the data's
    epoch to the training loop's (resuming, say).
    """

    def __init__(self, definition: Union[PipelineDef, Pipeline], *, seed: Optional[int] = None,
                 as_numpy: bool = False, provenance: bool = False, epoch: int = 0):
        """``provenance=True`` adds the rows' ids and echo indices as int64 fields
        "__ids__" and "__echo__" (attributes of a Batch do not cross to the main
        process from DataLoader workers). ``epoch``: the first pass's."""
        super().__init__()
        self.definition = definition.definition if isinstance(definition, Pipeline) else definition
        self.seed = seed
        self.as_numpy = as_numpy
        self.provenance = provenance
        if epoch < 0:
            raise SpecError(f"TorchIterable: expected an epoch >= 0, got {epoch}")
        self._epochs = _EpochCounter(epoch)
        # Set by a StatefulDataLoader: snapshots every this many batches (0: none), the
        # state the next pass restores, and the pipeline of a pass without workers.
        self._snapshot_every = 0
        self._resume: Optional[bytes] = None
        self._live: Optional[Pipeline] = None

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_live"] = None  # a running pipeline stays in its process
        return state

    def set_epoch(self, epoch: int) -> None:
        """The next pass over this dataset is epoch ``epoch``."""
        if epoch < 0:
            raise SpecError(f"set_epoch: expected an epoch >= 0, got {epoch}")
        self._epochs.set(epoch)

    @property
    def next_epoch(self) -> int:
        """The epoch the next pass will be."""
        return self._epochs.peek()

    def _for_worker(self, d: PipelineDef, info: Any) -> PipelineDef:
        """The definition a DataLoader worker (or the main process: ``info`` None) builds."""
        if info is not None:
            _refuse_service_workers(d, "TorchIterable", int(info.num_workers))
        elastic = d.find("elastic") == 0
        if info is not None and info.num_workers > 1:
            if elastic:  # worker w reads its own lanes: consumer w of the rank's num_workers
                d = d.with_option(0, "consumers_per_rank", int(info.num_workers)).with_option(
                    0, "consumer", int(info.id))
            else:
                # Put first, also before a rank's shard stage (distributed()): each worker
                # takes its share of the rank's share.
                d = d.inserting(0, [{"op": "shard", "num_shards": info.num_workers, "index": info.id}])
        if elastic and info is not None and self._snapshot_every > 0:
            d = d.with_option(0, "lane_counts", True)  # each batch's __lanes__
        return d

    def __iter__(self) -> Iterator[Batch]:
        info: Any = torch.utils.data.get_worker_info()
        if info is None:
            epoch = self._epochs.claim(None, 1)
        else:
            epoch = self._epochs.claim(int(info.seed) - int(info.id), int(info.num_workers))
        resume = self._resume
        if info is None:
            self._resume = None  # a worker's copy goes with it; the main process's is used once
        try:
            d = self._for_worker(self.definition, info)
            p = d.build(self.seed, epoch=epoch, as_numpy=self.as_numpy)
        except SpecError as e:
            if info is None or info.num_workers < 2:
                raise
            raise SpecError(f"TorchIterable with {info.num_workers} DataLoader workers: {e}") from None
        with p:
            if resume is not None:
                p.load_state_dict({"format": _STATE_FORMAT, "epoch": epoch, "state": resume})
            if info is None:
                self._live = p
            try:
                yield from self._batches(p)
            finally:
                self._live = None

    def _start_state(self, epoch: int, resume: Optional[bytes], num_workers: int, worker: int) -> bytes:
        """The state of worker ``worker`` of ``num_workers`` at the start of a pass of
        ``epoch`` (restored from ``resume``), before any batch."""
        d = self._for_worker(self.definition, types.SimpleNamespace(num_workers=num_workers, id=worker))
        with d.build(self.seed, epoch=epoch, as_numpy=True) as p:
            if resume is not None:
                p.load_state_dict({"format": _STATE_FORMAT, "epoch": epoch, "state": resume})
            return bytes(p.state_dict()["state"])

    def _batches(self, p: Pipeline) -> Iterator[Batch]:
        """``p``'s batches with provenance and, in a StatefulDataLoader's worker, a
        snapshot of ``p`` after every ``_snapshot_every``-th batch (the first included)."""
        for j, b in enumerate(p):
            if self.provenance:
                if self.as_numpy:
                    b["__ids__"] = np.asarray(b.ids, dtype=np.int64)
                    b["__echo__"] = np.asarray(b.echo, dtype=np.int64)
                else:
                    b["__ids__"] = torch.tensor(b.ids, dtype=torch.int64)
                    b["__echo__"] = torch.tensor(b.echo, dtype=torch.int64)
            if "__lanes__" in b and j % self._snapshot_every == 0:
                raw = np.frombuffer(bytes(p.state_dict()["state"]), dtype=np.uint8)
                b["__lane_state__"] = raw if self.as_numpy else torch.from_numpy(raw.copy())
            yield b


_LOADER_STATE_FORMAT = "dataecho.loader-state/1"  # the dict StatefulDataLoader.state_dict() returns


class _Pass:
    """What a StatefulDataLoader has returned of one pass: each lane's rows counted so far
    and at its worker's latest snapshot, and each worker's latest snapshot (by its lanes)."""

    def __init__(self, epoch: int, resume: Optional[bytes]):
        self.epoch = epoch
        self.resume = resume  # the state the pass started from (skips applied), or None
        self.done = False
        self.counts: Dict[int, int] = {}
        self.at_snapshot: Dict[int, int] = {}
        self.snapshots: Dict[Tuple[int, ...], bytes] = {}

    def returned(self, lanes: Any, snapshot: Any) -> None:
        pairs: List[List[int]] = np.asarray(lanes).reshape(-1, 2).tolist()
        for lane, count in pairs:
            self.counts[lane] = count
        if snapshot is not None:
            self.snapshots[tuple(sorted(lane for lane, _ in pairs))] = np.asarray(snapshot).tobytes()
            for lane, count in pairs:
                self.at_snapshot[lane] = count


class StatefulDataLoader(torch.utils.data.DataLoader):
    """A DataLoader over a ``TorchIterable`` (``batch_size=None``: the pipeline batches)
    whose position saves and resumes, as torchdata's StatefulDataLoader's does:
    ``state_dict()`` after any batch, ``load_state_dict()`` before the next pass, which
    continues from there; the state pickles (``torch.save``).

    ``num_workers=0``: the state is the pipeline's own (``Pipeline.state_dict``): the
    resumed pass returns exactly the batches that followed, of any pipeline.

    With workers the pipeline must be elastic (``elastic()`` or
    ``distributed(elastic=True)``): each worker reads its own lanes, and after every
    ``snapshot_every``-th batch it returns (the first included) sends its pipeline's state
    with the batch. The loader keeps each worker's latest snapshot and counts the rows of
    each lane returned since; the state is the snapshots merged and those counts, which the
    resumed pipelines skip. So a resume reads again fewer than ``snapshot_every`` batches
    per worker (and the batches the workers had made ahead), and it may have another
    number of workers (0 included): over the interrupted and the resumed pass, every row
    of the rank's epoch is returned once, the order being the resumed workers'. Refused
    with workers: a pipeline that is not elastic, batch echo (an echo after the batch),
    persistent workers.

    ``state_dict()`` = ``{"format": "dataecho.loader-state/1", "epoch", "state", "skip"}``:
    the pass's epoch (the next one once a pass has ended), the engine's state (None: the
    epoch's start) and ``{lane: rows to skip}``.
    """

    def __init__(self, dataset: TorchIterable, num_workers: int = 0, snapshot_every: int = 16, **kw: Any):
        if not isinstance(dataset, TorchIterable):
            raise SpecError(f"StatefulDataLoader: expected a TorchIterable, got {type(dataset).__name__}")
        if kw.pop("batch_size", None) is not None:
            raise SpecError("StatefulDataLoader: the pipeline batches: leave batch_size out (None)")
        if snapshot_every < 1:
            raise SpecError(f"StatefulDataLoader: expected snapshot_every >= 1, got {snapshot_every}")
        if kw.get("persistent_workers"):
            raise SpecError("StatefulDataLoader: persistent workers would not start a pass from a loaded state: "
                            "leave persistent_workers False")
        d = dataset.definition
        if num_workers > 0:
            _refuse_service_workers(d, "StatefulDataLoader", num_workers)
        if num_workers > 0 and d.find("elastic") != 0:
            raise SpecError(f"StatefulDataLoader: with {num_workers} workers the pipeline must be elastic "
                            "(elastic() or distributed(elastic=True)): a worker's position is its lanes'; "
                            "use num_workers=0 for this one")
        batch = d.find("batch")
        if num_workers > 0 and batch is not None and d.find("echo", start=batch + 1) is not None:
            raise SpecError("StatefulDataLoader: batch echo (the echo after the batch) takes num_workers=0: a "
                            "worker's snapshot and the rows counted after it cannot split a batch's copies, and "
                            "which batches are echoed would depend on the number of workers; echo before the "
                            "batch to use workers")
        super().__init__(dataset, batch_size=None, num_workers=num_workers, **kw)
        self.snapshot_every = snapshot_every
        self._pass: Optional[_Pass] = None
        self._loaded: Optional[Dict[str, Any]] = None  # load_state_dict's, until a pass starts from it
        self._next_resume: Optional[bytes] = None

    def __iter__(self) -> Iterator[Batch]:
        ds: TorchIterable = self.dataset
        resume, self._next_resume, self._loaded = self._next_resume, None, None
        self._pass = _Pass(ds.next_epoch, resume)
        ds._snapshot_every = self.snapshot_every if self.num_workers > 0 else 0
        ds._resume = resume
        it = super().__iter__()
        if self.num_workers > 0:
            ds._resume = None  # the workers started with their copies
        return self._returned(it, self._pass)

    @staticmethod
    def _returned(it: Iterator[Batch], pass_: _Pass) -> Iterator[Batch]:
        for b in it:
            lanes = b.pop("__lanes__", None)
            snapshot = b.pop("__lane_state__", None)
            if lanes is not None:
                pass_.returned(lanes, snapshot)
            yield b
        pass_.done = True

    def _state(self, epoch: int, state: Optional[bytes], skip: Mapping[int, int]) -> Dict[str, Any]:
        return {"format": _LOADER_STATE_FORMAT, "epoch": epoch, "state": state, "skip": dict(skip)}

    def _worker_lanes(self) -> List[Tuple[int, ...]]:
        """Each worker's lanes (worker w of W of rank r of N: consumer r + N w of N W)."""
        first = self.dataset.definition.stages[0]
        k, n, r = int(first.get("lanes", 12)), int(first.get("world_size", 1)), int(first.get("rank", 0))
        w_count = self.num_workers
        return [tuple(range(r + n * w, k, n * w_count)) for w in range(w_count)]

    def state_dict(self) -> Dict[str, Any]:
        """The position after the batches returned so far (see the class)."""
        ds: TorchIterable = self.dataset
        p = self._pass
        if p is None:
            return dict(self._loaded) if self._loaded is not None else self._state(ds.next_epoch, None, {})
        if p.done:
            return self._state(p.epoch + 1, None, {})
        if self.num_workers == 0:
            live = ds._live
            if live is None:  # no batch yet
                return self._state(p.epoch, p.resume, {})
            return self._state(live.epoch, bytes(live.state_dict()["state"]), {})
        if not p.counts:
            return self._state(p.epoch, p.resume, {})
        states = list(p.snapshots.values())
        for w, lanes in enumerate(self._worker_lanes()):
            if lanes not in p.snapshots:  # a worker that has returned nothing yet
                states.append(ds._start_state(p.epoch, p.resume, self.num_workers, w))
        try:
            merged = _core.merge_elastic_states(states, same_step=False)
        except _core.Error as e:
            raise SpecError(f"StatefulDataLoader.state_dict: {e}") from None
        skip = {lane: count - p.at_snapshot.get(lane, 0) for lane, count in p.counts.items()}
        return self._state(p.epoch, merged, {lane: n for lane, n in skip.items() if n > 0})

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Makes the next pass continue from ``state`` (a ``state_dict()``, of this loader or
        of one with another number of workers)."""
        if not isinstance(state, Mapping) or state.get("format") != _LOADER_STATE_FORMAT:
            raise SpecError("StatefulDataLoader.load_state_dict: not a StatefulDataLoader state "
                            "(expected the dict state_dict() returns)")
        epoch, raw, skip = state.get("epoch"), state.get("state"), state.get("skip") or {}
        if not isinstance(epoch, int) or epoch < 0:
            raise SpecError(f"StatefulDataLoader.load_state_dict: 'epoch' is {epoch!r}, expected an integer >= 0")
        resume: Optional[bytes] = None
        if raw is not None:
            resume = bytes(raw)
            if skip:
                try:
                    resume = _core.with_lane_skips(resume, {int(k): int(v) for k, v in skip.items()})
                except _core.Error as e:
                    raise SpecError(f"StatefulDataLoader.load_state_dict: {e}") from None
        self.dataset.set_epoch(epoch)
        self._next_resume, self._loaded, self._pass = resume, dict(state), None
