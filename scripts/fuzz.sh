#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) for the TFRecord framing, the
# tf.Example parser, the tar reader and the image decoders (with the fused decode and
# augmentation), and runs each for a bounded time. Any crash, leak or sanitizer report
# fails the script.
#   scripts/fuzz.sh [seconds per target, default 20]
# Environment: FUZZ_BUILD (default build-fuzz), CXX_FUZZ (default clang++-14).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_TARGET=${1:-${FUZZ_TIME:-20}}
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
mkdir -p "$OUT/proto/dataecho/proto" "$OUT/obj"

protoc --cpp_out="$OUT/proto/dataecho/proto" -I "$ROOT/proto" "$ROOT/proto/example.proto"

FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -I"$ROOT/include" -I"$ROOT/src" -I"$ROOT/tests" -I"$OUT/proto")
SOURCES=(
  "$OUT/proto/dataecho/proto/example.pb.cc"
  "$ROOT/src/core/tensor.cc" "$ROOT/src/core/block_cache.cc" "$ROOT/src/core/error.cc" "$ROOT/src/core/example.cc" "$ROOT/src/core/stats.cc"
  "$ROOT/src/io/open_stream.cc" "$ROOT/src/io/local_file_stream.cc" "$ROOT/fuzz/http_stub.cc"
  "$ROOT/src/formats/crc32c.cc" "$ROOT/src/formats/memory_stream.cc" "$ROOT/src/formats/tfrecord_reader.cc"
  "$ROOT/src/formats/tfrecord_writer.cc" "$ROOT/src/formats/tf_example.cc" "$ROOT/src/formats/tar_reader.cc"
  "$ROOT/src/image/codec.cc" "$ROOT/src/image/jpeg_codec.cc" "$ROOT/src/image/png_codec.cc"
  "$ROOT/src/image/augment.cc" "$ROOT/src/image/resize.cc"
)
OBJS=()
pids=()
for src in "${SOURCES[@]}"; do
  obj="$OUT/obj/$(basename "${src%.cc}").o"
  OBJS+=("$obj")
  if [[ ! -f "$obj" || "$src" -nt "$obj" ]]; then
    extra=()
    # As CMakeLists.txt: the resampler must never fuse a multiply and an add (the fused
    # and unfused augmentation paths must give the same bits; the image target checks it).
    [[ $src == */image/resize.cc ]] && extra=(-ffp-contract=off)
    "$CXX" "${FLAGS[@]}" "${extra[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" &
    pids+=($!)
    if (( ${#pids[@]} >= JOBS )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done

LIBS=($(pkg-config --libs protobuf libarchive libturbojpeg libjpeg spng) -lpthread)
TARGETS=(tfrecord_framing_fuzz tf_example_fuzz tar_reader_fuzz image_decode_fuzz)
for t in "${TARGETS[@]}"; do
  "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$ROOT/fuzz/$t.cc" "${OBJS[@]}" "${LIBS[@]}" -o "$OUT/$t"
done

# Seeds: a GNU tar shard for the tar reader, a tf.Example, small JPEGs and PNGs that
# the image target writes itself; the TFRecord framing starts from nothing.
SEEDS="$OUT/seeds"
rm -rf "$SEEDS" && mkdir -p "${TARGETS[@]/#/$SEEDS/}" "$SEEDS/src"
DATAECHO_FUZZ_WRITE_SEEDS="$SEEDS/image_decode_fuzz" "$OUT/image_decode_fuzz"
printf '3\n' > "$SEEDS/src/a0.cls"; printf 'jpegbytes' > "$SEEDS/src/a0.jpg"; printf '7' > "$SEEDS/src/a1.cls"
tar --sort=name -cf "$SEEDS/tar_reader_fuzz/seed.tar" -C "$SEEDS/src" .
printf '\x0a\x0c\x0a\x0a\x0a\x01a\x12\x05\x1a\x03\x0a\x01\x07' > "$SEEDS/tf_example_fuzz/seed"

status=0
for t in "${TARGETS[@]}"; do
  echo "== $t for ${SECONDS_PER_TARGET}s"
  mkdir -p "$OUT/corpus/$t"
  if ! (cd "$OUT" && "./$t" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -print_final_stats=1 \
        "$OUT/corpus/$t" "$SEEDS/$t" 2>&1 | tail -n 15); then
    echo "FAIL: $t found a crash (see $OUT/crash-*)"
    status=1
  fi
done
exit $status
