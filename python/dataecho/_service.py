"""The data service from Python (docs/service.md): the dispatcher's status. A pipeline's
upstream goes to the service's workers with ``PipelineDef.distribute``, which
scripts/gen_spec.py writes from the ``service`` source's declaration (_declared.py)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from . import _core
from ._pipeline import _in_python_terms

_Path = Union[str, "os.PathLike[str]"]


def service_status(address: str, *, token_file: Optional[_Path] = None, ca_file: Optional[_Path] = None,
                   ca_path: Optional[_Path] = None, tls_server_name: Optional[str] = None,
                   timeout_s: float = 10.0) -> Dict[str, Any]:
    """The status of the dispatcher at ``address`` (HOST:PORT), as ``dataecho service status
    HOST:P --json`` prints it: ``{"dispatcher", "version", "journal", "jobs": [{"job",
    "name", "fingerprint", "sharding"}], "workers": [{"worker", "address", "version",
    "threads", "last_beat_s", "alive", "elements", "bytes"}]}``.

    The token is the first line of ``token_file``, else ``$DATAECHO_SERVICE_TOKEN``, else
    none. TLS (a dispatcher started with ``--tls-cert`` and ``--tls-key``): ``ca_file``, a
    PEM file of the CA(s) that signed its certificate, and/or ``ca_path``, a folder whose
    ``*.pem`` and ``*.crt`` files are joined (as ``--ca-file`` and ``--ca-path``); without
    either the call is plaintext. ``tls_server_name``: the name the certificate must carry
    instead of ``address``'s host (``--tls-server-name``). Raises ``dataecho.Error`` with
    the engine's message when a CA file cannot be read (naming it), or the dispatcher
    cannot be reached within ``timeout_s`` seconds, fails the TLS handshake or refuses the
    token. The first call loads the service's gRPC plugin; ``import dataecho`` does not.
    """

    def text(p: Optional[_Path]) -> str:
        return "" if p is None else os.fspath(p)

    try:
        status = _core.service_status(address, text(token_file), float(timeout_s), text(ca_file), text(ca_path),
                                      tls_server_name or "")
    except _core.Error as e:  # the engine's message, naming this function's keywords
        raise _in_python_terms(e, str(e).replace("--token-file", "token_file")) from None
    return dict(status)
