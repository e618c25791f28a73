# Shared by bench/dataloader_compare.sh, bench/fusion_compare.sh, bench/elastic_compare.sh
# and bench/python_overhead.sh: the benchmark data, the dataecho pipeline specs, and running a
# measured command. Needs DE (the dataecho binary), DATA (the data folder) and FM
# (Debian's Fashion-MNIST folder); `timed` needs RUNS (the runs folder).

log() { echo "== $*" >&2; }

# timed NAME CMD...: stdout (one JSON line) -> RUNS/NAME.json, /usr/bin/time -v -> RUNS/NAME.time,
# /proc/loadavg just before the run -> RUNS/NAME.load (each window's other load is in the
# JSON: windows_other_cores).
timed() {
  local name=$1; shift
  log "$name: $*"
  cat /proc/loadavg > "$RUNS/$name.load"
  /usr/bin/time -v -o "$RUNS/$name.time" "$@" > "$RUNS/$name.json"
}

# prepare NAME COUNT CONVERT-ARGS...: DATA/NAME_tar and DATA/NAME_dir, once (kept until
# the arguments change).
prepare() {  # name count convert-args...
  local name=$1 count=$2; shift 2
  local stamp="$count $*"
  if [[ -f $DATA/$name.stamp && $(cat "$DATA/$name.stamp") == "$stamp" ]]; then
    log "data $name: kept ($DATA/$name.stamp)"; return
  fi
  rm -rf "$DATA/${name}_tar" "$DATA/${name}_dir" "$DATA/$name.stamp"
  local common=(--images "$FM/train-images-idx3-ubyte.gz" --labels "$FM/train-labels-idx1-ubyte.gz" --limit "$count" "$@")
  log "data $name: dataecho convert ${common[*]}"
  "$DE" convert "${common[@]}" --to tar --out "$DATA/${name}_tar" --name train --shards 4 >&2
  "$DE" convert "${common[@]}" --to dir --out "$DATA/${name}_dir" >&2
  echo "$stamp" > "$DATA/$name.stamp"
}
# prepare_photos COUNT [FFCV]: DATA/photo_dir (bench/make_photos.py: photographic JPEGs of
# 400-560 pixels' width, 40-120 KB, quality 90, from the photograph Debian's
# python-matplotlib-data ships) and DATA/photo_tar (the same bytes in 4 tar shards), once.
# With FFCV=1 (bench/dataloader_compare.sh, when FFCV can be imported) make_photos.py
# writes DATA/photo_src instead; bench/ffcv_side.py writes DATA/photo.beton from it
# (FFCV re-encodes every image with OpenCV at quality 90) and takes the bytes the .beton
# stores back out into DATA/photo_dir, so that every side reads the same bytes; after the
# shards are made, it checks that the folder and the shards hold the .beton's images
# byte for byte.
prepare_photos() {
  local count=$1 ffcv=${2:-0} stamp="photos $1 seed 2023"
  local here
  here=$(dirname "${BASH_SOURCE[0]}")
  [[ $ffcv == 1 ]] && stamp+=" bytes from the ffcv .beton"
  if [[ -f $DATA/photo.stamp && $(cat "$DATA/photo.stamp") == "$stamp" ]]; then
    log "data photo: kept ($DATA/photo.stamp: $stamp)"; return
  fi
  rm -rf "$DATA/photo_tar" "$DATA/photo_dir" "$DATA/photo_src" "$DATA/photo.beton" "$DATA/photo.beton.json" "$DATA/photo.stamp"
  if [[ $ffcv == 1 ]]; then
    log "data photo: bench/make_photos.py --count $count, then the FFCV .beton and its bytes"
    /usr/bin/python3 "$here/make_photos.py" --out "$DATA/photo_src" --count "$count" --seed 2023
    /usr/bin/python3 "$here/ffcv_side.py" write --src "$DATA/photo_src" --beton "$DATA/photo.beton" --out "$DATA/photo_dir"
  else
    log "data photo: bench/make_photos.py --count $count"
    /usr/bin/python3 "$here/make_photos.py" --out "$DATA/photo_dir" --count "$count" --seed 2023
  fi
  "$DE" convert --dir "$DATA/photo_dir" --to tar --out "$DATA/photo_tar" --name train --shards 4 >&2
  if [[ $ffcv == 1 ]]; then
    /usr/bin/python3 "$here/ffcv_side.py" verify --beton "$DATA/photo.beton" --dir "$DATA/photo_dir" --tar "$DATA/photo_tar/train-*.tar"
  fi
  echo "$stamp" > "$DATA/photo.stamp"
}
# Fashion-MNIST's own mean/std for the PNG workload (both sides use the same values).
PNG_MEAN=0.2860
PNG_STD=0.3530
# spec OUT TAR-DIR EXT FN ARGS THREADS: tar source -> map FN (parallelism THREADS, or 1
# inline for 0) -> batch 128 [-> prefetch 4 when THREADS >= 1].
spec() {
  local out=$1 dir=$2 ext=$3 fn=$4 args=$5 t=$6 par=1 tail=',
    {"op": "prefetch", "buffer": 4}'
  [[ $t -ge 1 ]] && par=$t
  [[ $t -eq 0 ]] && tail=''
  cat > "$out" <<EOF
{
  "seed": 7,
  "source": {"kind": "tar", "uri": "$dir/train-*.tar", "fields": {"image": "$ext", "label": "cls"}},
  "stages": [
    {"op": "map", "fn": "$fn", "args": $args, "parallelism": $par},
    {"op": "batch", "size": 128}$tail
  ]
}
EOF
}
# folder_spec OUT DIR FN ARGS THREADS READS: the same pipeline over the class_name/file
# folder itself (the `files` source, READS reads in flight) instead of the tar shards.
folder_spec() {
  local out=$1 dir=$2 fn=$3 args=$4 t=$5 reads=$6
  spec "$out" "$dir" - "$fn" "$args" "$t"
  /usr/bin/python3 - "$out" "$dir" "$reads" <<'PY'
import json, sys
out, root, reads = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(out) as f:
    s = json.load(f)
s["source"] = {"kind": "files", "root": root, "reads_in_flight": reads}
with open(out, "w") as f:
    json.dump(s, f, indent=2)
PY
}
JPEG_ARGS='{"channels": 3, "random_resized_crop": 224, "flip": true, "normalize": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}}'
PNG_ARGS="{\"pad_crop\": 4, \"flip\": true, \"normalize\": {\"mean\": [$PNG_MEAN], \"std\": [$PNG_STD]}}"

