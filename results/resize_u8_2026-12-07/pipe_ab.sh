#!/usr/bin/env bash
# e2e.sh ROUNDS: dataecho pipe over the 2,048 photos (4 tar shards), decode_augment
# (random resized crop 224 + flip, uint8 out; or + ImageNet normalize, float out),
# parallelism 1, batch 128; before (the binary of the code before the uint8 kernels) and
# after, plus float output with each binary (the control: unchanged code), alternating, rotating the order each round.
# Prints user+sys CPU seconds, wall seconds and ms CPU per image for each run.
set -euo pipefail
D=/tmp/resize_u8
rounds=${1:-5}
sed 's/"flip": true}/"flip": true, "normalize": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}}/' $D/u8_spec.json > $D/float_spec.json
run() {  # NAME BINARY SPEC
  /usr/bin/time -v "$2" pipe "$3" > $D/out_$1.jsonl 2> $D/time_$1.txt
  local n u s w
  n=$(grep -c . $D/out_$1.jsonl)
  u=$(sed -n 's/.*User time (seconds): //p' $D/time_$1.txt)
  s=$(sed -n 's/.*System time (seconds): //p' $D/time_$1.txt)
  w=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' $D/time_$1.txt)
  echo "$1 batches=$n user=$u sys=$s wall=$w ms_per_image=$(echo "($u + $s) * 1000 / 2048" | bc -l | cut -c1-6)"
}
names=(before after float_after float_before)
bins=($D/dataecho.before $D/dataecho.after $D/dataecho.after $D/dataecho.before)
specs=($D/u8_spec.json $D/u8_spec.json $D/float_spec.json $D/float_spec.json)
for r in $(seq 1 "$rounds"); do
  for j in 0 1 2 3; do
    i=$(( (j + r) % 4 ))
    echo -n "round $r "; run "${names[$i]}" "${bins[$i]}" "${specs[$i]}"
  done
done
