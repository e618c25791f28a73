"""TorchIterable: a dataecho pipeline as a torch IterableDataset (imports torch)."""

from __future__ import annotations

from typing import Any, Iterator, Optional, Union

import numpy as np
import torch
import torch.utils.data

from ._definition import PipelineDef
from ._pipeline import Batch, Pipeline


class TorchIterable(torch.utils.data.IterableDataset):
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
        info: Any = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            # Put first, also before a rank's shard stage (distributed()): each worker
            # takes its share of the rank's share.
            d = d.inserting(0, [{"op": "shard", "num_shards": info.num_workers, "index": info.id}])
        with d.build(self.seed, as_numpy=self.as_numpy) as p:
            for b in p:
                if self.provenance:
                    if self.as_numpy:
                        b["__ids__"] = np.asarray(b.ids, dtype=np.int64)
                        b["__echo__"] = np.asarray(b.echo, dtype=np.int64)
                    else:
                        b["__ids__"] = torch.tensor(b.ids, dtype=torch.int64)
                        b["__echo__"] = torch.tensor(b.echo, dtype=torch.int64)
                yield b
