"""dataecho: an input pipeline with data echoing, for PyTorch training loops.

Data echoing (Choi et al., 2019) repeats the output of an earlier pipeline stage while
the next fresh element is still being read or decoded, so that an input-bound training
step does not wait. The model then reaches its target after reading fewer fresh
examples. This package is dataecho's C++ engine seen from Python: the same builder
(the C++ ``PipelineDef``, bound), the same JSON specs, the same stats, with batches as
torch tensors over the engine's own buffers (no copy)::

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

The modules: ``_definition`` (PipelineDef and the sources), ``_pipeline`` (Pipeline,
Batch, merge_states), ``_profile`` (profile), ``_service`` (service_status, the data
service's dispatcher; ``PipelineDef.distribute`` sends an upstream to its workers),
``_torch`` (TorchIterable and StatefulDataLoader, which import torch when first used);
``_core`` is the C++ extension.
``dataecho.stats`` (imported on its own: ``from dataecho import stats``) has the
experiment protocol's statistics, the engine's medians and bootstrap intervals.
"""

from __future__ import annotations

from typing import Any

from . import _core
from ._core import DataError, Error, SpecError
from ._definition import PipelineDef, class_to_idx, files, idx, range, sample, service, source, tar, text, tfrecord
from ._pipeline import Batch, Pipeline, clear_tuner_memory, merge_states
from ._profile import profile
from ._service import service_status

__version__: str = _core.__version__

__all__ = [
    "Batch",
    "DataError",
    "Error",
    "Pipeline",
    "PipelineDef",
    "SpecError",
    "StatefulDataLoader",
    "class_to_idx",
    "clear_tuner_memory",
    "files",
    "TorchIterable",
    "idx",
    "merge_states",
    "profile",
    "range",
    "sample",
    "service",
    "service_status",
    "source",
    "tar",
    "text",
    "tfrecord",
]


def __getattr__(name: str) -> Any:  # _torch imports torch only when first used
    if name in ("TorchIterable", "StatefulDataLoader"):
        from . import _torch

        globals()[name] = getattr(_torch, name)
        return globals()[name]
    raise AttributeError(f"module 'dataecho' has no attribute {name!r}")
