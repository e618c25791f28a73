"""The data service from Python (docs/service.md): the dispatcher's status. A pipeline's
upstream goes to the service's workers with ``PipelineDef.distribute``, which
scripts/gen_spec.py writes from the ``service`` source's declaration (_declared.py)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from . import _core
from ._pipeline import _in_python_terms


def service_status(address: str, *, token_file: Optional[Union[str, "os.PathLike[str]"]] = None,
                   timeout_s: float = 10.0) -> Dict[str, Any]:
    """The status of the dispatcher at ``address`` (HOST:PORT), as ``dataecho service status
    HOST:P --json`` prints it: ``{"dispatcher", "version", "journal", "jobs": [{"job",
    "name", "fingerprint", "sharding"}], "workers": [{"worker", "address", "version",
    "threads", "last_beat_s", "alive", "elements", "bytes"}]}``.

    The token is the first line of ``token_file``, else ``$DATAECHO_SERVICE_TOKEN``, else
    none. Raises ``dataecho.Error`` with the engine's message when the dispatcher cannot
    be reached within ``timeout_s`` seconds or refuses the token. The first call loads
    the service's gRPC plugin; ``import dataecho`` does not.
    """
    try:
        status = _core.service_status(address, "" if token_file is None else os.fspath(token_file),
                                      float(timeout_s))
    except _core.Error as e:  # the engine's message, naming this function's keyword
        raise _in_python_terms(e, str(e).replace("--token-file", "token_file")) from None
    return dict(status)
