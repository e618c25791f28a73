"""The experiments of docs/protocol.md, docs/lm_protocol.md and docs/distributed.md as a
package: the readers of their run files (``runfiles``), their statistics (``stats``, the
engine's bootstrap), their spec edits (``specs``, through ``dataecho.PipelineDef``) and
each experiment's reports (``protocol``, ``lm``, ``distributed``).

Run from the repository's root as modules, e.g. ``python3 -m experiments.protocol.targets``;
the shell scripts beside them keep the processes (servers, training runs) and call these
modules for everything they read or write. ``runfiles`` needs nothing beyond Python;
``stats`` and ``specs`` need the ``dataecho`` package (the build's ``build/python`` on
``PYTHONPATH``, or installed).
"""
