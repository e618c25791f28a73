#!/usr/bin/env bash
# dataecho against PyTorch's DataLoader on identical work, in one run (issue 8).
#
#   bench/dataloader_compare.sh [--build DIR] [--out DIR] [--jpeg-images N] [--png-images N]
#                               [--epochs E] [--window-seconds S] [--rounds R] [--threads "0 1 2"]
#                               [--malloc-tuned]
#
# 1. Prepares the data once (kept in OUT/dataloader_data, redone when the sizes change)
#    with `dataecho convert` from Debian's Fashion-MNIST:
#      jpeg  N images resized to 256x256, RGB, JPEG quality 90 (ImageNet-sized), as 4 tar
#            shards and as a class_name/file.jpg folder;
#      png   the 28x28 grayscale images as PNG, as 4 tar shards and as a folder.
# 2. Measures images/s delivered as float batches of 128, each with 0 (everything in the
#    consumer's thread), 1 and 2 threads / workers:
#      dataecho    build/bin/dataloader_bench over a spec: tar source -> map
#                  decode_augment|augment (parallelism 1 or 2) -> batch 128 -> prefetch 4
#                  (0 threads: parallelism 1 and no prefetch, all inline);
#      DataLoader  bench/dataloader_compare.py: ImageFolder + torchvision transforms,
#                  num_workers 0/1/2, torch.set_num_threads(1) everywhere;
#      reference   (jpeg only) two, over the same files, 1 and 2 threads:
#                  "decode only": a plain TurboJPEG tjDecompress2 loop;
#                  "hand": the same work by hand (dataloader_bench reference --work
#                  augment, bench/hand_augment.h): full decode, then random resized crop
#                  224, antialiased resize, flip, normalize to float32 batches in plain
#                  loops; dataecho's decode_augment decodes only the crop region.
#    Each run is wrapped in /usr/bin/time -v for its peak RSS. Runs of one thread count
#    follow each other (dataecho, DataLoader, reference), so that they see the same load.
# 3. Prints a table and writes OUT/dataloader_compare.json.
#
# --malloc-tuned runs every process of both sides with
#   GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295
# (freed memory stays in the heap and is reused instead of being unmapped and faulted in
# again: see docs/dataloader.md) and writes OUT/dataloader_compare_malloc_tuned.json.
#
# Needs: a build of dataecho (configured here if BUILD has none), Debian's python3-torch
# and python3-torchvision under /usr/bin/python3, /usr/bin/time (scripts/bootstrap.sh
# installs all of them).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$ROOT/out
JPEG_IMAGES=1024
PNG_IMAGES=8192
PHOTO_IMAGES=2048  # photographic JPEGs (bench/make_photos.py)
EPOCHS=3   # measured windows per run
WINDOW=5   # seconds: a window runs epochs back to back until this long (issue 23, section 4)
ROUNDS=1
THREADS="0 1 2"
TUNED=0
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
    --malloc-tuned) TUNED=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
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
if [[ ! -f $BUILD/build.ninja && ! -f $BUILD/Makefile ]]; then
  log "configuring $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
log "building dataecho_cli and dataloader_bench in $BUILD"
cmake --build "$BUILD" --target dataecho_cli dataloader_bench >&2
DE=$BUILD/bin/dataecho
BENCH=$BUILD/bin/dataloader_bench

# ---- 1. data, once; the specs ----
prepare_photos "$PHOTO_IMAGES"
prepare jpeg "$JPEG_IMAGES" --resize 256 --encode jpeg --quality 90 --channels 3
prepare png "$PNG_IMAGES" --encode png

# ---- 2. runs ----
# Freshly written shards are still being written back to disk by kernel threads, which
# take CPU from the first runs on a small machine (dataecho's 0-thread run measured 20%
# slower right after the conversion): flush them first.
sync
sleep 2
if [[ $TUNED == 1 ]]; then
  export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295
  RUNS=$OUT/dataloader_runs_malloc_tuned
  RESULT=$OUT/dataloader_compare_malloc_tuned.json
  mkdir -p "$RUNS"
fi

# jpeg_runs ROUND WORKLOAD: dataecho, the DataLoader and both references over
# DATA/WORKLOAD_{tar,dir}, at every thread count.
jpeg_runs() {
  local round=$1 wl=$2 t rt
  for t in $THREADS; do
    spec "$RUNS/${wl}_t$t.spec.json" "$DATA/${wl}_tar" jpg decode_augment "$JPEG_ARGS" "$t"
    timed "r${round}_${wl}_dataecho_t$t" "$BENCH" pipeline --spec "$RUNS/${wl}_t$t.spec.json" --epochs "$EPOCHS" --window-seconds "$WINDOW"
    timed "r${round}_${wl}_dataloader_w$t" $PY "$ROOT/bench/dataloader_compare.py" --root "$DATA/${wl}_dir" --workload jpeg --workers "$t" --epochs "$EPOCHS" --window-seconds "$WINDOW"
    rt=$(( t > 1 ? t : 1 ))
    timed "r${round}_${wl}_reference_t$t" "$BENCH" reference --dir "$DATA/${wl}_dir" --threads "$rt" --epochs "$EPOCHS" --window-seconds "$WINDOW"
    timed "r${round}_${wl}_hand_t$t" "$BENCH" reference --work augment --dir "$DATA/${wl}_dir" --threads "$rt" --epochs "$EPOCHS" --window-seconds "$WINDOW"
  done
}

START=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
  jpeg_runs "$round" photo
  jpeg_runs "$round" jpeg
  for t in $THREADS; do
    spec "$RUNS/png_t$t.spec.json" "$DATA/png_tar" png decode_augment "$PNG_ARGS" "$t"
    timed "r${round}_png_dataecho_t$t" "$BENCH" pipeline --spec "$RUNS/png_t$t.spec.json" --epochs "$EPOCHS" --window-seconds "$WINDOW"
    timed "r${round}_png_dataloader_w$t" $PY "$ROOT/bench/dataloader_compare.py" --root "$DATA/png_dir" --workload png --workers "$t" --epochs "$EPOCHS" --window-seconds "$WINDOW" --mean $PNG_MEAN --std $PNG_STD
  done
done
ELAPSED=$(( $(date +%s) - START ))

# ---- 3. table + JSON ----
WINDOW="$WINDOW" $PY - "$RUNS" "$RESULT" "$ROUNDS" "$THREADS" "$ELAPSED" "$JPEG_IMAGES" "$PNG_IMAGES" "$EPOCHS" <<'EOF'
import json, os, platform, re, subprocess, sys
runs, out, rounds, threads, elapsed = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(t) for t in sys.argv[4].split()], int(sys.argv[5])
jpeg_images, png_images, epochs = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])

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
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
        j["peak_rss_mib"] = int(m.group(1)) / 1024 if m else None
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
for wl in ("photo", "jpeg", "png"):
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
result = {
    "machine": {"cpu": cpu(), "cores": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
    "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__},
    "settings": {"batch": 128, "epochs_per_run": epochs, "rounds": rounds, "jpeg_images": jpeg_images,
                 "png_images": png_images, "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""), "window_seconds": float(os.environ.get("WINDOW", "5")), "rate": "median window of the median round; a window runs epochs back to back for at least window_seconds and counts the images after its first batch over the time from that batch to its last; *_rounds: each round's own ratio, and their median"},
    "elapsed_s": elapsed,
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
for r in rows:
    if r["hand_images_per_s"]:
        print(f"{r['workload']} {r['threads']} thread(s): the same work by hand {r['hand_images_per_s']:.0f} images/s;"
              f" dataecho / hand, median over rounds of each round's ratio: {fmt(r['dataecho_over_hand_median_of_rounds'], '{:.0%}')}")
print(f"\nimages/s as float batches of 128 (median window of at least {float(os.environ.get('WINDOW', '5')):g} s, median round; the two 'rounds' columns: the"
      f" median over rounds of each round's dataecho/DataLoader and dataecho/ref); threads 0 = all in the consumer's thread"
      f" (dataecho inline, DataLoader num_workers=0); ref = decode only (TurboJPEG, full image), max(1, thr) threads;"
      f" hand = the same work by hand (full decode, crop, antialiased resize, flip, normalize; bench/hand_augment.h);"
      f" RSS = peak resident set of the process (/usr/bin/time -v), DL workers = each worker's VmHWM."
      f"\nmachine: {result['machine']['cpu']}, {os.cpu_count()} cores, load average at the end {os.getloadavg()[0]:.1f};"
      f" {elapsed} s of runs; GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '') or '(unset)'}. JSON: {out}")
EOF
