#!/bin/bash
# A/B: the before binary (bench rows only, commit 9022c90) and the after binary, alternately.
cd "$(dirname "$0")/../.."
out=results/ops_handoff_2026-12-02
filter='BM_Prefetch/|BM_MapIdentity|BM_TextLines'
for round in 1 2; do
  for v in before after; do
    b=build/bin/ops_bench; [ $v = before ] && b=build/ops_bench_before
    echo "== $v round $round $(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
    $b --benchmark_filter="$filter" --benchmark_min_time=0.5 --benchmark_repetitions=2 \
      --benchmark_out=$out/${v}_round${round}.json --benchmark_out_format=json 2>&1 | grep -E "BM_.*(mean|median)" | grep median | awk '{print $1, $NF}'
  done
done
