#!/bin/bash
# Voluntary context switches (sleeps) and CPU seconds of one pass over each row, before and after.
cd "$(dirname "$0")/../.."
for f in 'BM_Prefetch/4/' 'BM_Prefetch/64/' 'BM_MapIdentity/2/' 'map:2/map_buffer:0/prefetch:0/' 'map:2/map_buffer:256/prefetch:0/' 'map:0/map_buffer:0/prefetch:4/' 'map:0/map_buffer:0/prefetch:256/' 'map:2/map_buffer:0/prefetch:4/' 'map:2/map_buffer:256/prefetch:256/'; do
  for v in before after; do
    b=build/bin/ops_bench; [ $v = before ] && b=build/ops_bench_before
    r=$(/usr/bin/time -f "vol_ctxsw=%w invol=%c user=%U sys=%S" $b --benchmark_filter="$f" --benchmark_min_time=0.01 2>&1 | grep -E "vol_ctxsw|items_per")
    echo "$v $f $(echo "$r" | grep -o 'items_per_second=[^ ]*') $(echo "$r" | grep vol_ctxsw)"
  done
done
