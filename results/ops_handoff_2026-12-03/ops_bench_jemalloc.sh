#!/bin/bash
# The same ops_bench with jemalloc in place of glibc's malloc (Debian's libjemalloc2,
# preloaded): how much of a small element's handoff is the allocator. Diagnostic only:
# dataecho does not ship or load jemalloc.
exec env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 "${OPS_BENCH:-/tmp/ops_bench_after}" "$@"
