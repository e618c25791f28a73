"""TorchIterable: a dataecho pipeline as a torch IterableDataset (imports torch)."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import weakref
from typing import Any, Iterator, Optional, Union

import numpy as np
import torch
import torch.utils.data

from ._core import SpecError
from ._definition import PipelineDef
from ._pipeline import Batch, Pipeline


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


class TorchIterable(torch.utils.data.IterableDataset):
    """A ``torch.utils.data.IterableDataset`` over a dataecho pipeline, for code that
    expects a DataLoader: ``DataLoader(de.TorchIterable(d), batch_size=None)``.

    dataecho batches and parallelizes inside the pipeline, so ``num_workers=0`` is
    the setting to use: worker processes add a copy of every batch through shared
    memory and nothing else. With ``num_workers=N`` anyway, each worker builds its own
    pipeline after the fork (never forking live threads) and takes a share of the
    files (whole files when there are at least N, else every N-th element), so no
    example is read twice; the threads inside each worker still run in parallel. An
    elastic pipeline (``distributed(elastic=True)``) takes ``num_workers`` 0 or 1.

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

    def set_epoch(self, epoch: int) -> None:
        """The next pass over this dataset is epoch ``epoch``."""
        if epoch < 0:
            raise SpecError(f"set_epoch: expected an epoch >= 0, got {epoch}")
        self._epochs.set(epoch)

    @property
    def next_epoch(self) -> int:
        """The epoch the next pass will be."""
        return self._epochs.peek()

    def __iter__(self) -> Iterator[Batch]:
        d = self.definition
        info: Any = torch.utils.data.get_worker_info()
        if info is None:
            epoch = self._epochs.claim(None, 1)
        else:
            epoch = self._epochs.claim(int(info.seed) - int(info.id), int(info.num_workers))
        if info is not None and info.num_workers > 1 and d.find("elastic") is not None:
            raise SpecError(f"TorchIterable: the pipeline is elastic and the DataLoader has {info.num_workers} "
                            "workers: use num_workers=0 (an elastic rank reads its lanes on the pipeline's own "
                            "threads; DataLoader workers do not share a rank's lanes)")
        if info is not None and info.num_workers > 1:
            # Put first, also before a rank's shard stage (distributed()): each worker
            # takes its share of the rank's share.
            d = d.inserting(0, [{"op": "shard", "num_shards": info.num_workers, "index": info.id}])
        with d.build(self.seed, epoch=epoch, as_numpy=self.as_numpy) as p:
            for b in p:
                if self.provenance:
                    if self.as_numpy:
                        b["__ids__"] = np.asarray(b.ids, dtype=np.int64)
                        b["__echo__"] = np.asarray(b.echo, dtype=np.int64)
                    else:
                        b["__ids__"] = torch.tensor(b.ids, dtype=torch.int64)
                        b["__echo__"] = torch.tensor(b.echo, dtype=torch.int64)
                yield b
