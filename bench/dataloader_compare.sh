#!/usr/bin/env bash
# dataecho against PyTorch's DataLoader and FFCV on identical work, in one run.
#
#   bench/dataloader_compare.sh [--build DIR] [--out DIR] [--photo-images N] [--jpeg-images N]
#                               [--png-images N] [--epochs E] [--window-seconds S] [--rounds R]
#                               [--threads "0 1 2"] [--workloads "photo jpeg png"]
#                               [--ffcv-layouts "chw channels_last"] [--malloc-tuned]
#                               [--reads-in-flight N]
#
# 1. Prepares the data once (kept in OUT/dataloader_data, redone when the sizes change):
#      photo N photographic JPEGs (bench/make_photos.py, 400-560 px wide, quality 90).
#            With FFCV installed they go through FFCV's writer first: OUT/dataloader_data/
#            photo.beton (RGBImageField(write_mode="jpg", max_resolution=largest side + 1,
#            jpeg_quality=90) + IntField label). FFCV 0.0.3 decodes and re-encodes every
#            image with OpenCV, so the stored bytes are taken back out of the .beton
#            (metadata data_ptr + allocation table size) into the folder the other sides
#            read and into the tar shards, and checked byte for byte (SHA-256) against it
#            (bench/ffcv_side.py write / verify). Without FFCV, make_photos.py's own bytes.
#    With `dataecho convert` from Debian's Fashion-MNIST:
#      jpeg  N images resized to 256x256, RGB, JPEG quality 90 (ImageNet-sized), as 4 tar
#            shards and as a class_name/file.jpg folder;
#      png   the 28x28 grayscale images as PNG, as 4 tar shards and as a folder.
# 2. Measures images/s delivered as float batches of 128, each with 0 (everything in the
#    consumer's thread), 1 and 2 threads / workers:
#      dataecho    build/bin/dataloader_bench over a spec: tar source -> map
#                  decode_augment|augment (parallelism 1 or 2) -> batch 128 -> prefetch 4
#                  (0 threads: parallelism 1 and no prefetch, all inline);
#      folder      (photo and jpeg) the same dataecho pipeline over the class_name/file
#                  folder the DataLoader reads, with the `files` source (reads_in_flight
#                  N, default 8) instead of the tar shards;
#      DataLoader  bench/dataloader_compare.py: ImageFolder + torchvision transforms,
#                  num_workers 0/1/2, torch.set_num_threads(1) everywhere;
#      FFCV        (photo only; 1 and 2 workers: FFCV has no 0-worker mode, num_workers < 1
#                  means all cores) bench/ffcv_side.py run: python3-ffcv 0.0.3's Loader over
#                  the .beton, batch 128, order RANDOM, os_cache=True, drop_last=False,
#                  batches_ahead 3 (its default); pipeline RandomResizedCropRGBImageDecoder
#                  ((224, 224)) (full libjpeg-turbo decode, crop, OpenCV resize),
#                  RandomHorizontalFlip, NormalizeImage(ImageNet mean/std x 255, float32),
#                  ToTensor, ToTorchImage. Its workers are numba threads in one process.
#                  Layouts (--ffcv-layouts): "chw" = ToTorchImage(channels_last=False), a
#                  contiguous float32 CHW batch like every other side's; "channels_last" =
#                  FFCV's default, an NCHW view of NHWC memory (one copy less). One untimed
#                  warm-up epoch first (numba compiles the pipeline). If FFCV cannot be
#                  imported, this side is skipped and the script says so (stderr, table, JSON);
#      reference   (jpeg and photo) two, over the same files, 1 and 2 threads:
#                  "decode only": a plain TurboJPEG tjDecompress2 loop;
#                  "hand": the same work by hand (dataloader_bench reference --work
#                  augment, bench/hand_augment.h): full decode, then random resized crop
#                  224, antialiased resize, flip, normalize to float32 batches in plain
#                  loops; dataecho's decode_augment decodes only the crop region.
#    Each run is wrapped in /usr/bin/time -v for its peak RSS; the Python sides and
#    dataloader_bench also sample the summed PSS of all their processes every 0.2 s. Runs
#    of one thread count follow each other (dataecho, DataLoader, FFCV, references), so
#    that they see the same load.
# 3. Prints a table and writes OUT/dataloader_compare.json, with what a page fault costs on
#    this machine (bench/page_fault_cost.py, measured before the runs): the peers fault in
#    every batch they allocate and dataecho reuses its buffers, so the ratios depend on it.
#
# --malloc-tuned runs every process of every side with
#   GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295
# (freed memory stays in the heap and is reused instead of being unmapped and faulted in
# again: see docs/dataloader.md) and writes OUT/dataloader_compare_malloc_tuned.json.
#
# Needs: a build of dataecho (configured here if BUILD has none), Debian's python3-torch
# and python3-torchvision under /usr/bin/python3, /usr/bin/time; for the FFCV side
# python3-ffcv, python3-numba, python3-opencv (scripts/bootstrap.sh --bench-deps installs
# all of them).
# A run to keep goes to results/<what>_<YYYY-MM-DD>[-<word>]/ (results/README.md): its JSON,
# a README.txt with the command, the commit and the machine, and its runs in the folder's
# archive (`python3 -m experiments.archive pack DEST --from out/dataloader_runs --as runs`).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
JPEG_IMAGES=1024
PNG_IMAGES=8192
PHOTO_IMAGES=2048  # photographic JPEGs (bench/make_photos.py)
EPOCHS=3   # measured windows per run
WINDOW=5   # seconds: a window runs epochs back to back until this long (shorter ones timed the scheduler)
ROUNDS=1
THREADS="0 1 2"
READS=8    # reads in flight of the folder side (the files source)
TUNED=0
WORKLOADS="photo jpeg png"
FFCV_LAYOUTS="chw channels_last"
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --jpeg-images) JPEG_IMAGES=$2; shift 2 ;;
    --png-images) PNG_IMAGES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --photo-images) PHOTO_IMAGES=$2; shift 2 ;;
    --window-seconds) WINDOW=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --reads-in-flight) READS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --ffcv-layouts) FFCV_LAYOUTS=$2; shift 2 ;;
    --malloc-tuned) TUNED=1; shift ;;
    -h|--help) sed -n '2,61p' "$0"; exit 0 ;;
    *) echo "dataloader_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=dataloader_lib.sh
source "$ROOT/bench/dataloader_lib.sh"

PY=/usr/bin/python3
FM=/usr/share/datasets/fashion-mnist
DATA=$OUT/dataloader_data
RUNS=$OUT/dataloader_runs
RESULT=$OUT/dataloader_compare.json
mkdir -p "$OUT" "$DATA" "$RUNS"


# ---- prerequisites ----
[[ -f $FM/train-images-idx3-ubyte.gz ]] || { echo "dataloader_compare: $FM missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "dataloader_compare: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
$PY -c 'import torch, torchvision' 2>/dev/null || {
  echo "dataloader_compare: $PY cannot import torch/torchvision (scripts/bootstrap.sh --bench-deps installs them)" >&2; exit 1; }
has_workload() { [[ " $WORKLOADS " == *" $1 "* ]]; }
for wl in $WORKLOADS; do
  [[ $wl == photo || $wl == jpeg || $wl == png ]] || { echo "dataloader_compare: unknown workload $wl" >&2; exit 2; }
done
for l in $FFCV_LAYOUTS; do
  [[ $l == chw || $l == channels_last ]] || { echo "dataloader_compare: unknown FFCV layout $l" >&2; exit 2; }
done
# FFCV: measured on the photo workload when it can be imported; otherwise skipped, loudly.
FFCV_OK=0
FFCV_STATUS="not run (no photo workload)"
if has_workload photo; then
  if FFCV_STATUS=$($PY "$ROOT/bench/ffcv_side.py" check 2>&1); then
    FFCV_OK=1
    log "FFCV side: $FFCV_STATUS"
  else
    FFCV_STATUS="skipped: $FFCV_STATUS"
    echo "dataloader_compare: WARNING: the FFCV side is $FFCV_STATUS" >&2
  fi
fi
if [[ ! -f $BUILD/build.ninja && ! -f $BUILD/Makefile ]]; then
  log "configuring $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
log "building dataecho_cli and dataloader_bench in $BUILD"
cmake --build "$BUILD" --target dataecho_cli dataloader_bench >&2
# Provenance: the commit the binaries were built from, and how many tracked files
# differed from it (0: the measured code is exactly that commit).
source "$ROOT/scripts/commit_state.sh"
COMMIT=$(commit_state "$ROOT")
CHANGED=$({ git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null || true; } | wc -l)
log "source: commit $COMMIT, $CHANGED tracked file(s) changed"
DE=$BUILD/bin/dataecho
BENCH=$BUILD/bin/dataloader_bench

# ---- 1. data, once; the specs ----
if has_workload photo; then prepare_photos "$PHOTO_IMAGES" "$FFCV_OK"; fi
if has_workload jpeg; then prepare jpeg "$JPEG_IMAGES" --resize 256 --encode jpeg --quality 90 --channels 3; fi
if has_workload png; then prepare png "$PNG_IMAGES" --encode png; fi

# ---- 2. runs ----
# Freshly written shards are still being written back to disk by kernel threads, which
# take CPU from the first runs on a small machine (dataecho's 0-thread run measured 20%
# slower right after the conversion): flush them first.
sync
sleep 2
# What fresh memory costs here (bench/page_fault_cost.py): the peers fault in every
# batch they allocate, dataecho reuses its buffers, so the ratios depend on it.
FAULT_COST=$($PY "$ROOT/bench/page_fault_cost.py")
log "page faults: $FAULT_COST"
if [[ $TUNED == 1 ]]; then
  export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295
  RUNS=$OUT/dataloader_runs_malloc_tuned
  RESULT=$OUT/dataloader_compare_malloc_tuned.json
  mkdir -p "$RUNS"
fi

# jpeg_side SIDE ROUND WORKLOAD T: one side's run at T threads / workers.
jpeg_side() {
  local side=$1 round=$2 wl=$3 t=$4 rt=$(( $4 > 1 ? $4 : 1 )) layout
  case $side in
    dataecho)
      spec "$RUNS/${wl}_t$t.spec.json" "$DATA/${wl}_tar" jpg decode_augment "$JPEG_ARGS" "$t"
      timed "r${round}_${wl}_dataecho_t$t" "$BENCH" pipeline --spec "$RUNS/${wl}_t$t.spec.json" --epochs "$EPOCHS" --window-seconds "$WINDOW" ;;
    folder)
      folder_spec "$RUNS/${wl}_folder_t$t.spec.json" "$DATA/${wl}_dir" decode_augment "$JPEG_ARGS" "$t" "$READS"
      timed "r${round}_${wl}_dataechofolder_t$t" "$BENCH" pipeline --spec "$RUNS/${wl}_folder_t$t.spec.json" --epochs "$EPOCHS" --window-seconds "$WINDOW" ;;
    dataloader)
      timed "r${round}_${wl}_dataloader_w$t" $PY "$ROOT/bench/dataloader_compare.py" --root "$DATA/${wl}_dir" --workload jpeg --workers "$t" --epochs "$EPOCHS" --window-seconds "$WINDOW" ;;
    ffcv)
      [[ $wl == photo && $FFCV_OK == 1 ]] || return 0
      if [[ $t -lt 1 ]]; then
        log "r${round}_${wl}_ffcv_w0: not run (FFCV has no 0-worker mode: num_workers < 1 means all cores)"; return 0
      fi
      for layout in $FFCV_LAYOUTS; do
        timed "r${round}_${wl}_ffcv_${layout}_w$t" $PY "$ROOT/bench/ffcv_side.py" run --beton "$DATA/photo.beton" --workers "$t" --epochs "$EPOCHS" --window-seconds "$WINDOW" \
          $([[ $layout == channels_last ]] && echo --channels-last)
      done ;;
    reference)
      timed "r${round}_${wl}_reference_t$t" "$BENCH" reference --dir "$DATA/${wl}_dir" --threads "$rt" --epochs "$EPOCHS" --window-seconds "$WINDOW" ;;
    hand)
      timed "r${round}_${wl}_hand_t$t" "$BENCH" reference --work augment --dir "$DATA/${wl}_dir" --threads "$rt" --epochs "$EPOCHS" --window-seconds "$WINDOW" ;;
  esac
}

# jpeg_runs ROUND WORKLOAD: dataecho, the DataLoader, FFCV (photo, 1 and 2 workers) and
# both references over DATA/WORKLOAD_{tar,dir,beton}, at every thread count; in that
# order in odd rounds and in the reverse order in even ones, so that no side always runs
# first (or last) after the one before it.
jpeg_runs() {
  local round=$1 wl=$2 t side sides=(dataecho folder dataloader ffcv reference hand)
  (( round % 2 == 0 )) && sides=(hand reference ffcv dataloader folder dataecho)
  for t in $THREADS; do
    for side in "${sides[@]}"; do jpeg_side "$side" "$round" "$wl" "$t"; done
  done
}

# A run's files from an earlier invocation must not be read as this one's.
rm -f "$RUNS"/r[0-9]*_*.json "$RUNS"/r[0-9]*_*.time "$RUNS"/r[0-9]*_*.load
START=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
  if has_workload photo; then jpeg_runs "$round" photo; fi
  if has_workload jpeg; then jpeg_runs "$round" jpeg; fi
  if has_workload png; then
    for t in $THREADS; do
      spec "$RUNS/png_t$t.spec.json" "$DATA/png_tar" png decode_augment "$PNG_ARGS" "$t"
      timed "r${round}_png_dataecho_t$t" "$BENCH" pipeline --spec "$RUNS/png_t$t.spec.json" --epochs "$EPOCHS" --window-seconds "$WINDOW"
      timed "r${round}_png_dataloader_w$t" $PY "$ROOT/bench/dataloader_compare.py" --root "$DATA/png_dir" --workload png --workers "$t" --epochs "$EPOCHS" --window-seconds "$WINDOW" --mean $PNG_MEAN --std $PNG_STD
    done
  fi
done
ELAPSED=$(( $(date +%s) - START ))

# ---- 3. table + JSON ----
WINDOW="$WINDOW" WORKLOADS="$WORKLOADS" FFCV_LAYOUTS="$FFCV_LAYOUTS" FFCV_OK="$FFCV_OK" FFCV_STATUS="$FFCV_STATUS" \
PHOTO_IMAGES="$PHOTO_IMAGES" DATA="$DATA" COMMIT="$COMMIT" CHANGED="$CHANGED" FAULT_COST="$FAULT_COST" \
  $PY - "$RUNS" "$RESULT" "$ROUNDS" "$THREADS" "$ELAPSED" "$JPEG_IMAGES" "$PNG_IMAGES" "$EPOCHS" <<'EOF'
import json, os, platform, re, subprocess, sys
runs, out, rounds, threads, elapsed = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(t) for t in sys.argv[4].split()], int(sys.argv[5])
jpeg_images, png_images, epochs = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
workloads = os.environ["WORKLOADS"].split()
ffcv_layouts = os.environ["FFCV_LAYOUTS"].split() if os.environ["FFCV_OK"] == "1" else []

def per_round(name):
    """Each round's run (its JSON line plus peak_rss_mib), None where the round has none."""
    out = []
    for r in range(1, rounds + 1):
        base = os.path.join(runs, f"r{r}_{name}")
        if not os.path.exists(base + ".json"):
            out.append(None)
            continue
        with open(base + ".json") as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
        j = json.loads(lines[-1])
        with open(base + ".time") as f:
            t = f.read()
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", t)
        j["peak_rss_mib"] = int(m.group(1)) / 1024 if m else None
        m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", t)
        j["run_wall_s"] = sum(float(x) * 60 ** i for i, x in enumerate(reversed(m.group(1).split(":")))) if m else None
        out.append(j)
    return out

def rates(runs_of):
    """images/s of each round, None where the round has no run."""
    return [j["images_per_s"] if j else None for j in runs_of]

def paired(a, b):
    """Each round's a/b (the two ran minutes apart, under the same load) and their median."""
    ratios = [x / y for x, y in zip(a, b) if x and y]
    if not ratios:
        return [], None
    s = sorted(ratios)
    mid = len(s) // 2
    return ratios, (s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2)

def best(runs_of):
    """The median round by images/s (each run's own figure is its median window); the
    spread over rounds is in the *_rounds lists."""
    present = sorted((j for j in runs_of if j), key=lambda j: j["images_per_s"])
    return present[len(present) // 2] if present else None

rows = []
ffcv_run_s = 0.0
for wl in [w for w in ("photo", "jpeg", "png") if w in workloads]:
    for t in threads:
        de_runs = per_round(f"{wl}_dataecho_t{t}")
        dl_runs = per_round(f"{wl}_dataloader_w{t}")
        ref_runs = per_round(f"{wl}_reference_t{t}") if wl != "png" else []
        hand_runs = per_round(f"{wl}_hand_t{t}") if wl != "png" else []
        de, dl, ref, hand = best(de_runs), best(dl_runs), best(ref_runs), best(hand_runs)
        row = {"workload": wl, "threads": t,
               "dataecho_images_per_s": de["images_per_s"] if de else None,
               "dataloader_images_per_s": dl["images_per_s"] if dl else None,
               "reference_images_per_s": ref["images_per_s"] if ref else None,
               "reference_threads": ref["threads"] if ref else None,
               "hand_images_per_s": hand["images_per_s"] if hand else None,
               "dataecho_peak_rss_mib": de["peak_rss_mib"] if de else None,
               "dataecho_peak_pss_mib": de["peak_pss_kib"] / 1024 if de and de.get("peak_pss_kib") else None,
               "dataloader_peak_pss_sum_mib": dl["peak_pss_sum_kib"] / 1024 if dl and dl.get("peak_pss_sum_kib") else None,
               "dataloader_peak_rss_mib": dl["peak_rss_mib"] if dl else None,
               "dataloader_workers_peak_rss_mib": [k / 1024 for k in dl["workers_vm_hwm_kib"] if k] if dl else None,
               "dataecho_median_images_per_s": de["median_images_per_s"] if de else None,
               "dataloader_median_images_per_s": dl["median_images_per_s"] if dl else None,
               "dataecho_images_per_cpu_s": de["images_per_cpu_s"] if de else None,
               "dataloader_images_per_cpu_s": dl["images_per_cpu_s"] if dl else None,
               "reference_images_per_cpu_s": ref["images_per_cpu_s"] if ref else None}
        # The machine's other load in any window of the side's runs (cores; 0 on a quiet
        # machine): a figure measured beside load is said to be.
        for key, rs in (("dataecho", de_runs), ("dataloader", dl_runs), ("reference", ref_runs), ("hand", hand_runs)):
            loads = [j.get("max_other_cores") for j in rs if j and j.get("max_other_cores") is not None]
            row[f"{key}_max_other_cores"] = max(loads) if loads else None
        # Best against best can pair a fast minute of one side with a slow one of the
        # other; the median of each round's own ratio cannot.
        row["dataecho_over_reference_rounds"], row["dataecho_over_reference_median_of_rounds"] = (
            paired(rates(de_runs), rates(ref_runs)) if ref else ([], None))
        row["dataecho_over_hand_rounds"], row["dataecho_over_hand_median_of_rounds"] = (
            paired(rates(de_runs), rates(hand_runs)) if hand else ([], None))
        row["dataecho_over_dataloader_rounds"], row["dataecho_over_dataloader_median_of_rounds"] = (
            paired(rates(de_runs), rates(dl_runs)) if dl else ([], None))
        row["dataecho_over_dataloader"] = (row["dataecho_images_per_s"] / row["dataloader_images_per_s"]
                                           if de and dl else None)
        row["dataecho_over_reference"] = (row["dataecho_images_per_s"] / row["reference_images_per_s"]
                                          if de and ref else None)
        row["cpu_dataecho_over_dataloader"] = (row["dataecho_images_per_cpu_s"] / row["dataloader_images_per_cpu_s"]
                                               if de and dl else None)
        row["cpu_dataecho_over_reference"] = (row["dataecho_images_per_cpu_s"] / row["reference_images_per_cpu_s"]
                                              if de and ref else None)
        # FFCV: photo only, 1 and 2 workers; one entry per layout ("chw": contiguous CHW
        # like every other side; "channels_last": FFCV's default view of NHWC memory).
        if wl == "photo":
            for layout in ffcv_layouts:
                key = "ffcv" if layout == "chw" else "ffcv_channels_last"
                f_runs = per_round(f"{wl}_ffcv_{layout}_w{t}") if t >= 1 else []
                ffcv_run_s += sum(j["run_wall_s"] or 0 for j in f_runs if j)
                f = best(f_runs)
                row[f"{key}_images_per_s"] = f["images_per_s"] if f else None
                row[f"{key}_min_images_per_s"] = f["min_images_per_s"] if f else None
                row[f"{key}_max_images_per_s"] = f["max_images_per_s"] if f else None
                row[f"{key}_images_per_cpu_s"] = f["images_per_cpu_s"] if f else None
                row[f"{key}_peak_pss_mib"] = f["peak_pss_sum_kib"] / 1024 if f and f.get("peak_pss_sum_kib") else None
                row[f"{key}_peak_rss_mib"] = f["peak_rss_mib"] if f else None
                row[f"{key}_warmup_s"] = f["warmup_s"] if f else None
                loads = [j.get("max_other_cores") for j in f_runs if j and j.get("max_other_cores") is not None]
                row[f"{key}_max_other_cores"] = max(loads) if loads else None
                row[f"{key}_batch"] = ([f["batch_shape"], f["batch_dtype"], "contiguous" if f["batch_contiguous"] else "not contiguous"]
                                       if f else None)
                row[f"dataecho_over_{key}"] = row["dataecho_images_per_s"] / f["images_per_s"] if de and f else None
                row[f"dataecho_over_{key}_rounds"], row[f"dataecho_over_{key}_median_of_rounds"] = (
                    paired(rates(de_runs), rates(f_runs)) if f else ([], None))
                if t == 0:
                    row[f"{key}_note"] = "not run: FFCV has no 0-worker mode (num_workers < 1 means all cores)"
        # dataecho over the ImageFolder tree itself (the files source), against the same
        # DataLoader runs.
        fo_runs = per_round(f"{wl}_dataechofolder_t{t}") if wl != "png" else []
        fo = best(fo_runs)
        row["folder_images_per_s"] = fo["images_per_s"] if fo else None
        row["folder_peak_pss_mib"] = fo["peak_pss_kib"] / 1024 if fo and fo.get("peak_pss_kib") else None
        row["folder_over_dataloader_rounds"], row["folder_over_dataloader_median_of_rounds"] = (
            paired(rates(fo_runs), rates(dl_runs)) if fo and dl else ([], None))
        rows.append(row)

def cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()

import torch, torchvision, PIL
ffcv = {"status": os.environ["FFCV_STATUS"], "layouts": ffcv_layouts, "runs_s": round(ffcv_run_s, 1)}
try:
    with open(os.path.join(os.environ["DATA"], "photo.beton.json")) as f:
        ffcv["beton"] = json.load(f)
except OSError:
    pass
result = {
    "machine": {"cpu": cpu(), "cores": os.cpu_count(), "loadavg_at_end": os.getloadavg(),
                "memory": json.loads(os.environ["FAULT_COST"])},
    "source": {"commit": os.environ["COMMIT"], "tracked_files_changed": int(os.environ["CHANGED"])},
    "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__},
    "settings": {"batch": 128, "epochs_per_run": epochs, "rounds": rounds, "jpeg_images": jpeg_images,
                 "png_images": png_images, "photo_images": int(os.environ["PHOTO_IMAGES"]), "workloads": workloads, "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""), "window_seconds": float(os.environ.get("WINDOW", "5")), "rate": "median window of the median round; a window runs epochs back to back for at least window_seconds and counts the images after its first batch over the time from that batch to its last; *_rounds: each round's own ratio, and their median"},
    "elapsed_s": elapsed,
    "ffcv": ffcv,
    "photo_bytes": ("re-encoded by FFCV's writer (OpenCV, quality 90), taken out of the .beton; every side reads them"
                    if os.environ["FFCV_OK"] == "1" else "bench/make_photos.py's (no FFCV)") if "photo" in workloads else None,
    "rows": rows,
}
with open(out, "w") as f:
    json.dump(result, f, indent=2)

def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)
print()
print(f"{'':12} {'--------------- images/s (wall) ----------------':^57} {'------ images per CPU-second ------':^43} {'---- peak RSS MiB ----':^26}")
print(f"{'workload':8} {'thr':>3} {'dataecho':>9} {'DataLoader':>10} {'ratio':>6} {'ref':>7} {'de/ref':>6} {'rounds':>6} {'rounds':>6}"
      f" {'dataecho':>9} {'DataLoader':>10} {'ratio':>6} {'ref':>7} {'de/ref':>6}"
      f" {'dataecho':>8} {'DataLoader':>10} {'workers':>8}")
for r in rows:
    w = r["dataloader_workers_peak_rss_mib"]
    print(f"{r['workload']:8} {r['threads']:>3} {fmt(r['dataecho_images_per_s']):>9} {fmt(r['dataloader_images_per_s']):>10}"
          f" {fmt(r['dataecho_over_dataloader'], '{:.2f}x'):>6} {fmt(r['reference_images_per_s']):>7}"
          f" {fmt(r['dataecho_over_reference'], '{:.0%}'):>6}"
          f" {fmt(r['dataecho_over_dataloader_median_of_rounds'], '{:.1f}x'):>6}"
          f" {fmt(r['dataecho_over_reference_median_of_rounds'], '{:.0%}'):>6}"
          f" {fmt(r['dataecho_images_per_cpu_s']):>9} {fmt(r['dataloader_images_per_cpu_s']):>10}"
          f" {fmt(r['cpu_dataecho_over_dataloader'], '{:.2f}x'):>6} {fmt(r['reference_images_per_cpu_s']):>7}"
          f" {fmt(r['cpu_dataecho_over_reference'], '{:.0%}'):>6}"
          f" {fmt(r['dataecho_peak_rss_mib']):>8} {fmt(r['dataloader_peak_rss_mib']):>10}"
          f" {('+'.join(f'{x:.0f}' for x in w)) if w else '-':>8}")
for r in rows:
    print(f"{r['workload']} {r['threads']} thread(s): peak PSS, summed over a side's processes and sampled every 0.2 s:"
          f" dataecho {fmt(r['dataecho_peak_pss_mib'])} MiB, DataLoader {fmt(r['dataloader_peak_pss_sum_mib'])} MiB (main + workers)")
ffcv_rows = [r for r in rows if r["workload"] == "photo"]
if ffcv_rows and not ffcv_layouts:
    print(f"photo: FFCV {ffcv['status']}")
for r in ffcv_rows if ffcv_layouts else []:
    if r["threads"] == 0:
        print(f"photo 0 thread(s): FFCV not run (it has no 0-worker mode)")
        continue
    for key, name in (("ffcv", "FFCV, contiguous CHW"), ("ffcv_channels_last", "FFCV, channels_last view")):
        if f"{key}_images_per_s" not in r:
            continue
        print(f"photo {r['threads']} worker(s): {name} {fmt(r[f'{key}_images_per_s'])} images/s"
              f" ({fmt(r[f'{key}_min_images_per_s'])}-{fmt(r[f'{key}_max_images_per_s'])}),"
              f" {fmt(r[f'{key}_images_per_cpu_s'])} per CPU-s; dataecho / FFCV {fmt(r[f'dataecho_over_{key}'], '{:.2f}x')}"
              f" (rounds {fmt(r[f'dataecho_over_{key}_median_of_rounds'], '{:.2f}x')});"
              f" peak PSS {fmt(r[f'{key}_peak_pss_mib'])} MiB (dataecho {fmt(r['dataecho_peak_pss_mib'])}),"
              f" peak RSS {fmt(r[f'{key}_peak_rss_mib'])} MiB; untimed warm-up epoch {fmt(r[f'{key}_warmup_s'], '{:.1f}')} s")
for r in rows:
    if r.get("folder_images_per_s"):
        print(f"{r['workload']} {r['threads']} thread(s): dataecho over the folder (files source)"
              f" {r['folder_images_per_s']:.0f} images/s, peak PSS {fmt(r['folder_peak_pss_mib'])} MiB;"
              f" / DataLoader, median over rounds of each round's ratio:"
              f" {fmt(r['folder_over_dataloader_median_of_rounds'], '{:.2f}x')}"
              f" (rounds: {', '.join(f'{x:.2f}' for x in r['folder_over_dataloader_rounds'])})")
for r in rows:
    if r["hand_images_per_s"]:
        print(f"{r['workload']} {r['threads']} thread(s): the same work by hand {r['hand_images_per_s']:.0f} images/s;"
              f" dataecho / hand, median over rounds of each round's ratio: {fmt(r['dataecho_over_hand_median_of_rounds'], '{:.0%}')}")
print(f"\nimages/s as float batches of 128 (median window of at least {float(os.environ.get('WINDOW', '5')):g} s, median round; the two 'rounds' columns: the"
      f" median over rounds of each round's dataecho/DataLoader and dataecho/ref); threads 0 = all in the consumer's thread"
      f" (dataecho inline, DataLoader num_workers=0); ref = decode only (TurboJPEG, full image), max(1, thr) threads;"
      f" hand = the same work by hand (full decode, crop, antialiased resize, flip, normalize; bench/hand_augment.h);"
      f" RSS = peak resident set of the process (/usr/bin/time -v), DL workers = each worker's VmHWM."
      f"\nmachine: {result['machine']['cpu']}, {os.cpu_count()} cores, load average at the end {os.getloadavg()[0]:.1f}, a page fault {result['machine']['memory']['page_fault_us']:.2f} us;"
      f" {elapsed} s of runs"
      f"{f', of which FFCV {ffcv_run_s:.0f} s' if ffcv_layouts else ''}; GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '') or '(unset)'}. JSON: {out}")
EOF
