# shellcheck shell=bash
# bench/autotune_compare.sh --mode rebuild (sourced by it; see its header): the photo
# pipeline rebuilt for every pass against one long run, hand setting against "auto" with
# and without the tuner's memory. Needs ROOT, BUILD, DATA, RUNS, OUT, ROUNDS,
# SECONDS_PER_RUN, WINDOW_SECONDS, JPEG_ARGS and `timed` (bench/dataloader_lib.sh).

# rebuild_spec OUT REPEAT PARALLELISM BUFFER REMEMBER: the photo pipeline, with a repeat
# first when REPEAT is 1, and "autotune": {"remember": false} when REMEMBER is 0.
rebuild_spec() {
  local out=$1 repeat=$2 par=$3 buf=$4 remember=$5 head="" settings=""
  [[ $repeat == 1 ]] && head='{"op": "repeat"}, '
  [[ $remember == 0 ]] && settings='"autotune": {"remember": false},'
  cat > "$out" <<EOF
{
  "seed": 7, $settings
  "source": {"kind": "tar", "uri": "$DATA/photo_tar/train-*.tar", "fields": {"image": "jpg", "label": "cls"}},
  "stages": [$head{"op": "map", "fn": "decode_augment", "args": $JPEG_ARGS, "parallelism": $par},
    {"op": "batch", "size": 128}, {"op": "prefetch", "buffer": $buf}]
}
EOF
}

run_rebuild_mode() {
  local windows round name repeat par buf remember spec_file
  windows=$(/usr/bin/python3 -c "import sys; print(max(1, round(float(sys.argv[1]) / float(sys.argv[2]))))" \
    "$SECONDS_PER_RUN" "$WINDOW_SECONDS")
  local settings=("rebuild_hand 0 2 4 1" "rebuild_auto 0 \"auto\" \"auto\" 1"
                  "rebuild_fresh 0 \"auto\" \"auto\" 0" "long_hand 1 2 4 1"
                  "long_auto 1 \"auto\" \"auto\" 1")
  : > "$OUT/loads.txt"
  for round in $(seq "$ROUNDS"); do
    for s in "${settings[@]}"; do
      read -r name repeat par buf remember <<<"$s"
      spec_file=$RUNS/$name.spec.json
      rebuild_spec "$spec_file" "$repeat" "$par" "$buf" "$remember"
      echo "round $round $name $(date -u +%H:%M:%S) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/loads.txt"
      if [[ $repeat == 1 ]]; then
        timed "r${round}_$name" "$BUILD/bin/autotune_bench" --spec "$spec_file" --seconds "$SECONDS_PER_RUN"
      else
        timed "r${round}_$name" "$BUILD/bin/dataloader_bench" pipeline --spec "$spec_file" \
          --epochs "$windows" --window-seconds "$WINDOW_SECONDS"
      fi
    done
  done
  echo "end $(date -u +%H:%M:%S) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/loads.txt"
  # shellcheck source=scripts/commit_state.sh
  source "$ROOT/scripts/commit_state.sh"
  COMMIT=$(commit_state "$ROOT") summarize_rebuild "$RUNS" "$OUT/autotune_rebuild.json" \
    "$ROUNDS" "$SECONDS_PER_RUN" "$WINDOW_SECONDS"
}

# summarize_rebuild RUNS OUT_JSON ROUNDS SECONDS WINDOW_SECONDS (COMMIT in the
# environment): the table and OUT_JSON from the runs' files. A run's "cores" is the
# process's CPU time over its wall time (a rebuilt run's median window). The hand runs
# keep 2 threads busy, so their cores say what the machine gave: a round is "quiet" when
# both hand runs had 1.7 cores or more of the 2 (other work left the benchmark both), and
# the ratios are also summarized over the quiet rounds alone.
summarize_rebuild() {
  /usr/bin/python3 - "$@" <<'PY'
import json, os, statistics, sys
runs, out, rounds, seconds, window = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])

def rebuilt(r):  # (median window, mean of all windows), images/s
    return r["images_per_s"], statistics.mean(r["epochs_images_per_s"])

def cores(r):
    if "cores" in r:
        return r["cores"]
    return statistics.median(a / b for a, b in zip(r["epochs_images_per_s"], r["epochs_images_per_cpu_s"]))

def chose(t):
    return ", ".join(f"{k['node'].split(':')[1]} {k['param']}={k['value']}" for k in t.get("knobs", []))

per_round = []
for i in range(1, rounds + 1):
    r = {n: json.load(open(f"{runs}/r{i}_{n}.json"))
         for n in ("rebuild_hand", "rebuild_auto", "rebuild_fresh", "long_hand", "long_auto")}
    hand, auto, fresh = rebuilt(r["rebuild_hand"]), rebuilt(r["rebuild_auto"]), rebuilt(r["rebuild_fresh"])
    per_round.append({
        "rebuild_hand": hand[0], "rebuild_auto": auto[0], "rebuild_fresh": fresh[0],
        "rebuild_hand_all_windows": hand[1], "rebuild_auto_all_windows": auto[1],
        "rebuild_fresh_all_windows": fresh[1],
        "long_hand": r["long_hand"]["rows_per_s"], "long_auto": r["long_auto"]["rows_per_s"],
        "rebuild_auto_over_hand": auto[0] / hand[0], "rebuild_fresh_over_hand": fresh[0] / hand[0],
        "rebuild_auto_over_hand_all_windows": auto[1] / hand[1],
        "rebuild_fresh_over_hand_all_windows": fresh[1] / hand[1],
        "long_auto_over_hand": r["long_auto"]["rows_per_s"] / r["long_hand"]["rows_per_s"],
        "rebuild_auto_chose": chose(r["rebuild_auto"].get("tuning_last_pass", {})),
        "rebuild_auto_resumed": r["rebuild_auto"].get("tuning_last_pass", {}).get("resumed"),
        "rebuild_fresh_chose": chose(r["rebuild_fresh"].get("tuning_last_pass", {})),
        "long_auto_chose": chose(r["long_auto"]["tuning"]),
        "passes_per_window": r["rebuild_auto"].get("passes_per_window"),
        "cores": {n: round(cores(v), 2) for n, v in r.items()},
    })
    per_round[-1]["quiet"] = min(per_round[-1]["cores"][n] for n in ("rebuild_hand", "long_hand")) >= 1.7

def summary(key, rounds):
    v = [p[key] for p in rounds]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": len(v)}

keys = ("rebuild_auto_over_hand", "long_auto_over_hand", "rebuild_fresh_over_hand",
        "rebuild_auto_over_hand_all_windows", "rebuild_fresh_over_hand_all_windows")
result = {"commit": os.environ["COMMIT"], "cores": os.cpu_count(), "rounds": rounds,
          "seconds_per_run": seconds, "window_seconds": window, "per_round": per_round,
          "summary": {k: summary(k, per_round) for k in keys},
          "summary_quiet_rounds": {k: summary(k, [p for p in per_round if p["quiet"]]) for k in keys},
          "loadavg_at_end": os.getloadavg()[0]}
print(f"{'round':5} {'rebuilt hand':>12} {'auto':>7} {'fresh':>7} {'auto/hand':>9} {'fresh/hand':>10} "
      f"{'long hand':>9} {'long auto':>9} {'auto/hand':>9} {'hand cores':>10}  rebuilt auto chose")
for i, p in enumerate(per_round, 1):
    print(f"{i:5} {p['rebuild_hand']:12.0f} {p['rebuild_auto']:7.0f} {p['rebuild_fresh']:7.0f} "
          f"{p['rebuild_auto_over_hand']:9.1%} {p['rebuild_fresh_over_hand']:10.1%} {p['long_hand']:9.0f} "
          f"{p['long_auto']:9.0f} {p['long_auto_over_hand']:9.1%} "
          f"{min(p['cores']['rebuild_hand'], p['cores']['long_hand']):10.2f}  "
          f"{p['rebuild_auto_chose']}")
for title, part in (("all rounds", "summary"), ("quiet rounds", "summary_quiet_rounds")):
    for k in keys:
        s = result[part][k]
        if s:
            print(f"{title:12} {k:38} median {s['median']:6.1%}  range {s['min']:6.1%} - {s['max']:6.1%}"
                  f"  ({s['rounds']} rounds)")
json.dump(result, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
}
