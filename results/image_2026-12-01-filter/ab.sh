#!/usr/bin/env bash
cd /work/tmp
PG=$(ps -o pgid= -C dataecho-train-06a704c | head -1 | tr -d ' ')
[[ -n $PG ]] && kill -STOP -- -$PG
trap '[[ -n $PG ]] && kill -CONT -- -$PG' EXIT
for i in 1 2 3; do
  for spec in photo_t1.spec.json fm_t1.spec.json; do
    for v in new avx2first old; do
      r=$(./dlb_$v pipeline --spec $spec --epochs 3 --window-seconds 3 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['median_images_per_s']))")
      echo "$i $(basename $spec) $v $r"
    done
  done
done
