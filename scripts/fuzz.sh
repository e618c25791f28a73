#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) for the TFRecord framing, the
# tf.Example parser, the tar reader, the image decoders (with the fused decode and
# augmentation), dataecho's JPEG Huffman decoder against libjpeg's, and the texts an s3://
# read parses (S3's XML answers, AWS ini files), the data service's frames, and runs each for
# a bounded time. Any crash, leak, sanitizer report or difference fails the script.
#   scripts/fuzz.sh [seconds per target, default 20] [target ...]
# The corpus each target grows is kept between runs in FUZZ_CORPUS (default
# .fuzz-corpus/TARGET, git-ignored), beside the seeds: the committed corpus
# fuzz/corpus/jpeg_huffman (scripts/make_jpeg_corpus.py), the regression inputs in
# tests/image/data/jpeg_regressions, and files the script makes.
# Environment: FUZZ_BUILD (default build-fuzz), FUZZ_CORPUS, CXX_FUZZ (default clang++-14),
# FUZZ_JOBS (default 2: the build's jobs, and the targets run at a time).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_TARGET=${1:-${FUZZ_TIME:-20}}
shift $(($# > 0 ? 1 : 0))
if ! [[ $SECONDS_PER_TARGET =~ ^[1-9][0-9]*$ ]]; then
  # libFuzzer reads 0 or anything else as no limit at all and would run forever.
  sed -n '2,6p' "$0" >&2
  exit 2
fi
OUT=${FUZZ_BUILD:-$ROOT/build-fuzz}
CXX=${CXX_FUZZ:-clang++-14}
JOBS=${FUZZ_JOBS:-2}
command -v "$CXX" >/dev/null || {
  echo "fuzz.sh: $CXX not found: install Debian's clang (scripts/bootstrap.sh --deps does)" >&2
  exit 1
}
# clang finds the libFuzzer and ASan runtimes only at link time; say which package is
# missing rather than leave a linker error about libclang_rt.*.a.
RUNTIME_DIR=$("$CXX" -print-runtime-dir)
for lib in libclang_rt.fuzzer-x86_64.a libclang_rt.asan-x86_64.a libclang_rt.ubsan_standalone-x86_64.a; do
  if [[ ! -f "$RUNTIME_DIR/$lib" ]]; then
    echo "fuzz.sh: $RUNTIME_DIR/$lib is missing: clang's runtimes come with Debian's" \
      "libclang-rt-14-dev (apt-get install libclang-rt-14-dev, or scripts/bootstrap.sh --deps)" >&2
    exit 1
  fi
done
# A CMake build of the layer libraries the targets link (formats, image and the layers
# below them), every file compiled with the sanitizers and libFuzzer's coverage hooks.
TARGETS=(tfrecord_framing_fuzz tf_example_fuzz tar_reader_fuzz image_decode_fuzz jpeg_huffman_fuzz
  s3_text_fuzz frame_decode_fuzz)
[ $# -gt 0 ] && TARGETS=("$@")
cmake -S "$ROOT" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_CXX_FLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DDATAECHO_UNITY_LAYERS=ON -DDATAECHO_BUILD_FUZZ=ON -DDATAECHO_BUILD_TESTS=OFF -DDATAECHO_BUILD_BENCH=OFF -DDATAECHO_BUILD_CLI=OFF \
  -DDATAECHO_BUILD_TRAINER=OFF -DDATAECHO_BUILD_PYTHON=OFF >/dev/null
ninja -C "$OUT" -j"$JOBS" "${TARGETS[@]}"
BIN="$OUT/bin"

# Seeds: a GNU tar shard for the tar reader, a tf.Example, small JPEGs and PNGs that
# the image target writes itself, the committed JPEG corpus and the regression inputs;
# the TFRecord framing starts from nothing.
SEEDS="$OUT/seeds"
REGRESSIONS="$ROOT/tests/image/data/jpeg_regressions"
rm -rf "$SEEDS" && mkdir -p "${TARGETS[@]/#/$SEEDS/}" "$SEEDS/src"
for t in "${TARGETS[@]}"; do
  case $t in
    image_decode_fuzz)
      DATAECHO_FUZZ_WRITE_SEEDS="$SEEDS/$t" "$BIN/$t"
      cp "$REGRESSIONS"/*.fuzz "$SEEDS/$t/" ;;
    frame_decode_fuzz)
      DATAECHO_FUZZ_WRITE_SEEDS="$SEEDS/$t" "$BIN/$t" ;;
    jpeg_huffman_fuzz)  # an option byte of 0, then the file
      for f in "$REGRESSIONS"/*.jpg; do
        { printf '\x00'; cat "$f"; } > "$SEEDS/$t/$(basename "$f" .jpg).fuzz"
      done ;;
    tar_reader_fuzz)
      printf '3\n' > "$SEEDS/src/a0.cls"; printf 'jpegbytes' > "$SEEDS/src/a0.jpg"; printf '7' > "$SEEDS/src/a1.cls"
      tar --sort=name -cf "$SEEDS/$t/seed.tar" -C "$SEEDS/src" . ;;
    tf_example_fuzz)
      printf '\x0a\x0c\x0a\x0a\x0a\x01a\x12\x05\x1a\x03\x0a\x01\x07' > "$SEEDS/$t/seed" ;;
    s3_text_fuzz)  # an even byte then S3's XML, an odd byte then an AWS ini file
      printf '0<Error><Code>NoSuchKey</Code><Message>a &amp; &#x263A;</Message><Key>k</Key></Error>' \
        > "$SEEDS/$t/error.fuzz"
      printf '0<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a</Key><Size>3</Size></Contents><Contents><Key/><ETag>&quot;e&quot;</ETag></Contents><NextContinuationToken>t=</NextContinuationToken></ListBucketResult>' \
        > "$SEEDS/$t/list.fuzz"
      printf '1[default]\naws_access_key_id = A\ns3 =\n  addressing_style = path\n# c\n[profile x]\nregion=eu-west-1\n' \
        > "$SEEDS/$t/ini.fuzz" ;;
  esac
done

CORPUS=${FUZZ_CORPUS:-$ROOT/.fuzz-corpus}
LOGS="$OUT/logs"
rm -rf "$LOGS" && mkdir -p "$LOGS"
run_target() {  # run_target T: T for its time; its last lines in $LOGS/T.log, its status in $LOGS/T.rc
  local t=$1 committed=() rc=0
  mkdir -p "$CORPUS/$t"
  [ -d "$ROOT/fuzz/corpus/${t%_fuzz}" ] && committed=("$ROOT/fuzz/corpus/${t%_fuzz}")
  # New inputs go into the first folder, the kept corpus; the others are only read.
  (cd "$OUT" && "$BIN/$t" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -print_final_stats=1 \
    "$CORPUS/$t" "$SEEDS/$t" "${committed[@]}" 2>&1 | tail -n 15) >"$LOGS/$t.log" || rc=$?
  echo "$rc" >"$LOGS/$t.rc"
}
# libFuzzer runs one thread: FUZZ_JOBS targets at a time, each for its whole time, so the
# step takes about the targets' time over FUZZ_JOBS.
running=0
for t in "${TARGETS[@]}"; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "== $t for ${SECONDS_PER_TARGET}s"
  run_target "$t" &
  running=$((running + 1))
done
wait
status=0
for t in "${TARGETS[@]}"; do
  echo "== $t"
  cat "$LOGS/$t.log"
  if [ "$(cat "$LOGS/$t.rc" 2>/dev/null)" != 0 ]; then
    echo "FAIL: $t found a crash (see $OUT/crash-*)"
    status=1
  fi
done
exit $status
