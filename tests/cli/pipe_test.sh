#!/usr/bin/env bash
# `dataecho pipe` end to end: JSON lines, --values, --limit, --stats, state files, errors.
set -euo pipefail
BIN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$tmp/spec.json" <<'JSON'
{"seed": 5, "source": {"kind": "range", "count": 10},
 "stages": [{"op": "map", "fn": "square", "parallelism": 2}, {"op": "batch", "size": 4}]}
JSON
out=$("$BIN" pipe "$tmp/spec.json")
[ "$(echo "$out" | wc -l)" -eq 3 ] || fail "expected 3 lines, got: $out"
line1=$(echo "$out" | head -1)
[ "$line1" = '{"ids":[0,1,2,3],"echo":[0,0,0,0],"fields":{"value":{"dtype":"int64","shape":[4]}}}' ] || fail "line 1: $line1"

vals=$("$BIN" pipe "$tmp/spec.json" --values --limit 1)
[ "$vals" = '{"ids":[0,1,2,3],"echo":[0,0,0,0],"fields":{"value":{"dtype":"int64","shape":[4],"values":[0,1,4,9]}}}' ] || fail "values: $vals"

# stdin, and the stats table on standard error
"$BIN" pipe - --stats < "$tmp/spec.json" > "$tmp/out" 2> "$tmp/err"
grep -q "1:map(square)" "$tmp/err" || fail "no stats table: $(cat "$tmp/err")"
"$BIN" pipe "$tmp/spec.json" --stats-json "$tmp/stats.json" > /dev/null
grep -q '"2:batch"' "$tmp/stats.json" || fail "no stats json"

# save after one element, restore: the rest is the same as an uninterrupted run
"$BIN" pipe "$tmp/spec.json" --limit 1 --save-state "$tmp/state" > /dev/null
rest=$("$BIN" pipe "$tmp/spec.json" --restore-state "$tmp/state")
[ "$rest" = "$(echo "$out" | tail -2)" ] || fail "restore: $rest"

# an elastic pipeline on two ranks, saved after 2 batches each, goes on as one rank from
# both states: the ids of both parts are the ids of the whole range, once each
cat > "$tmp/elastic.json" <<'JSON'
{"seed": 5, "source": {"kind": "range", "count": 48, "shards": 4},
 "stages": [{"op": "shuffle", "buffer": 12}, {"op": "batch", "size": 8}]}
JSON
for r in 0 1; do
  "$BIN" pipe "$tmp/elastic.json" --world-size 2 --rank $r --lanes 6 --limit 2 \
    --save-state "$tmp/rank$r.state" > "$tmp/rank$r.out"
done
"$BIN" pipe "$tmp/elastic.json" --world-size 1 --rank 0 --lanes 6 \
  --restore-state "$tmp/rank0.state" "$tmp/rank1.state" > "$tmp/rest.out"
ids=$(cat "$tmp/rank0.out" "$tmp/rank1.out" "$tmp/rest.out" | /usr/bin/python3 -c \
  'import json, sys; print(sorted(i for l in sys.stdin for i in json.loads(l)["ids"]) == list(range(48)))')
[ "$ids" = True ] || fail "elastic resume on another world size: $(cat "$tmp/rest.out")"
"$BIN" pipe "$tmp/elastic.json" --world-size 5 --lanes 6 2> "$tmp/err" && fail "5 ranks of 6 lanes"
grep -q "6 lanes do not split over 5 ranks" "$tmp/err" || fail "no refusal: $(cat "$tmp/err")"

# text through tokenize, pack and padded_batch (docs/text.md); the uri is relative
# to the spec's folder
printf 'hi\nyo there\n' > "$tmp/corpus.txt"
cat > "$tmp/text.json" <<'JSON'
{"source": {"kind": "text", "uri": "corpus.txt"},
 "stages": [{"op": "map", "fn": "tokenize"}, {"op": "pack", "length": 4},
            {"op": "padded_batch", "size": 2, "fields": {"ids": {"value": -1}}}]}
JSON
out=$("$BIN" pipe "$tmp/text.json" --values)
[ "$(echo "$out" | wc -l)" -eq 2 ] || fail "text: expected 2 batches, got: $out"
echo "$out" | head -1 | grep -q '"tokens":{"dtype":"int32","shape":\[2,4\],"values":\[104,105,256,121,111,32,116,104\]}' \
  || fail "text: $(echo "$out" | head -1)"
"$BIN" pipe "$tmp/text.json" --values --limit 1 --save-state "$tmp/text_state" > /dev/null
rest=$("$BIN" pipe "$tmp/text.json" --values --restore-state "$tmp/text_state")
[ "$rest" = "$(echo "$out" | tail -1)" ] || fail "text restore: $rest"

# a wrong spec: exit code 1 and the JSON path on standard error
echo '{"source": {"kind": "range", "count": 3}, "stages": [{"op": "batch", "size": -1}]}' > "$tmp/bad.json"
if "$BIN" pipe "$tmp/bad.json" 2> "$tmp/err"; then fail "bad spec accepted"; fi
grep -q '\$.stages\[0\].size' "$tmp/err" || fail "error without path: $(cat "$tmp/err")"
if "$BIN" pipe "$tmp/missing.json" 2> "$tmp/err"; then fail "missing file accepted"; fi
grep -q 'missing.json' "$tmp/err" || fail "error without file name"
# A size beyond its declared bound is refused before anything runs, naming the option and
# the bound (an input found outside the project: pack's length of 2^40 once ended in
# std::bad_alloc).
regressions="$(dirname "$0")/../fixtures/regressions"
if "$BIN" pipe "$regressions/spec_pack_length_huge.json" > "$tmp/out" 2> "$tmp/err"; then fail "pack length 2^40 accepted"; fi
grep -qF 'spec: $.stages[1].length: expected an integer in [1, 16777216], got number 1099511627776' "$tmp/err" ||
  fail "pack length 2^40: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "pack length 2^40: elements came out before the error"
echo "cli pipe: ok"
