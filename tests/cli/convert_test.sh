#!/usr/bin/env bash
# `dataecho convert --text` end to end: lines (one file gzip) to TFRecord and tar shards,
# read back by `dataecho pipe` exactly as the text source reads the input; documents with
# --separator; JSON Lines with --field; errors naming the file and line.
set -euo pipefail
BIN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf 'alpha\r\nbeta gamma\n\n\xc3\xa9t\xc3\xa9\n' > "$tmp/a.txt"
for i in $(seq 1 300); do echo "line $i"; done | gzip > "$tmp/b.txt.gz"
# what the text source gives: the field "text" of each element, in order
values() {  # spec -> the "text" field of each element, as pipe --values prints it (a JSON string)
  "$BIN" pipe "$1" --values | sed -E 's/.*"text":\{"dtype":"uint8","shape":\[[0-9]*\],"text":("([^"\\]|\\.)*")\}.*/\1/'
}
echo "{\"source\": {\"kind\": \"text\", \"uri\": \"$tmp/*.txt*\"}}" > "$tmp/text.json"
want=$(values "$tmp/text.json")
[ "$(echo "$want" | wc -l)" -eq 303 ] || fail "text source: $(echo "$want" | wc -l) records"

"$BIN" convert --text "$tmp/*.txt*" --to tfrecord --shards 3 --out "$tmp/tf" --name c > "$tmp/out"
grep -q "convert: 3 files, 303 records" "$tmp/out" || fail "summary: $(cat "$tmp/out")"
echo "{\"source\": {\"kind\": \"tfrecord\", \"uri\": \"$tmp/tf/c-*.tfrecord\"}}" > "$tmp/tf.json"
[ "$(values "$tmp/tf.json")" = "$want" ] || fail "tfrecord round trip"

"$BIN" convert --text "$tmp/a.txt" "$tmp/b.txt.gz" --to tar --shards 2 --out "$tmp/tar" > /dev/null
echo "{\"source\": {\"kind\": \"tar\", \"uri\": \"$tmp/tar/data-*.tar\", \"fields\": {\"text\": \"txt\"}}}" > "$tmp/tar.json"
[ "$(values "$tmp/tar.json")" = "$want" ] || fail "tar round trip"
# (Listed whole into a file: `tar | head -1` under pipefail fails when tar gets SIGPIPE.)
tar -tf "$tmp/tar/data-00000.tar" > "$tmp/members"
[ "$(sed -n 1p "$tmp/members")" = "00000000.txt" ] || fail "tar member names: $(sed -n 1p "$tmp/members")"

# documents between blank lines, the separator typed as an escape
printf 'one\ntwo\n\nthree\n' > "$tmp/docs.txt"
"$BIN" convert --text "$tmp/docs.txt" --separator '\n\n' --to tar --out "$tmp/docs" > /dev/null
[ "$(tar -xOf "$tmp/docs/data-00000.tar" 00000000.txt)" = "$(printf 'one\ntwo')" ] || fail "documents"

printf '{"body": "hi", "n": 1}\n{"body": "yo"}\n' > "$tmp/a.jsonl"
"$BIN" convert --text "$tmp/a.jsonl" --jsonl --field body --to tar --out "$tmp/j" > /dev/null
[ "$(tar -xOf "$tmp/j/data-00000.tar" 00000001.txt)" = "yo" ] || fail "jsonl"

# errors: exit code 1, the file and the line on standard error, nothing written
printf 'ok\n\xff\n' > "$tmp/bad.txt"
if "$BIN" convert --text "$tmp/bad.txt" --to tfrecord --out "$tmp/bad" 2> "$tmp/err"; then fail "bad UTF-8 accepted"; fi
grep -q "line 2: invalid UTF-8" "$tmp/err" || fail "bad UTF-8 message: $(cat "$tmp/err")"
grep -q "bad.txt record 1 at byte 3" "$tmp/err" || fail "bad UTF-8 place: $(cat "$tmp/err")"
[ -z "$(ls -A "$tmp/bad")" ] || fail "shards written before the error"
if "$BIN" convert --text "$tmp/missing.txt" --to tar --out "$tmp/m" 2> "$tmp/err"; then fail "missing file accepted"; fi
grep -q "missing.txt" "$tmp/err" || fail "missing file message: $(cat "$tmp/err")"
if "$BIN" convert --text "$tmp/a.txt" --to dir --out "$tmp/d" 2> "$tmp/err"; then fail "--to dir accepted"; fi
grep -q "tfrecord or tar" "$tmp/err" || fail "--to dir message: $(cat "$tmp/err")"
echo "convert_test: ok"
