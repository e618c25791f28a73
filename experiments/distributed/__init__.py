"""Data-parallel scaling over the throttled network (docs/distributed.md): the table of the
committed runs (``report``); experiments/distributed/run.sh runs them."""
