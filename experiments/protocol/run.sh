#!/usr/bin/env bash
# The pre-registered experiment of docs/protocol.md, in resumable parts.
#   experiments/protocol/run.sh sweep [dataecho experiment flags]
#       the tuning sweep and the fresh-example counts: every cell of sweep.json, compute-
#       bound on local shards, after the committed runs (results/protocol/sweep) (a fixed echo factor gives the same data order whatever the
#       timing, tests/train/protocol_test.cc). Interrupt it at any time (Ctrl-C, or
#       `timeout -s INT 40m ...`): finished runs are kept and never redone; the run in
#       flight starts over next time.
#   experiments/protocol/run.sh network R [dataecho experiment flags]
#       the wall-clock runs at R (5 or 2): serves the shards with nginx on loopback,
#       calibrates the bandwidth with short baseline training runs over it (the
#       pipeline beside the train step, as in the real runs) until their R is within 10%
#       of R, then runs network.json: baseline, before augmentation at the a-priori
#       e = round(R) and at 2 and 4, batch echoing at 2, adaptive, 5 seeds each (the
#       baseline, e = 4 and the a-priori e on NETWORK_SEEDS: seeds 6-10 beside 1-5), at
#       the sweep's tuned rates (so after the sweep). Resumable like the sweep, as long as
#       the calibration lands on the same bandwidth (it is kept in calibration.txt and
#       reused; delete that file to calibrate again); the committed runs of
#       results/protocol/network-rR join first, with their calibration.
#   CPU_SPLIT=1 experiments/protocol/run.sh network R [flags]
#       the same with the train step on a core of its own and the pipeline's threads on
#       the other (`dataecho train --cpu-split 1`), calibration included, in
#       network-split-rR/ (docs/protocol.md, the train step on a core of its own).
#   experiments/protocol/run.sh demo
#       the README's main job (scripts/demo.sh runs it with PROTOCOL_OUT=out/demo): the
#       network runs in small, one seed, at R about 5 (DEMO_R): calibrated as above, then
#       the baseline, before augmentation at the a-priori e = round(R) and adaptive, at the
#       learning rates the committed sweep (results/protocol/sweep, copied to
#       $PROTOCOL_OUT/sweep) tuned for each, on the experiment's schedule (decay to 0 at
#       step 3,900) but stopped at a demo budget of 2,600 steps, to a demo target of 89%
#       validation accuracy (DEMO_TARGET; the experiment's is 90%).
#   DEMO_SMOKE=1 experiments/protocol/run.sh demo   (scripts/demo.sh --smoke)
#       every step of the demo on tiny budgets, in a minute or two, for CI: 4,096 training
#       images, one 20-step calibration run at the first bandwidth (taken whatever its R),
#       the three runs stopped at step 60 (decay to 0 there), a target of 70%
#       (tests/cli/demo_smoke_test.sh). Its figures mean nothing.
#   experiments/protocol/run.sh demo --dry-run
#       renders the demo's configs for e = DEMO_FACTOR (default 5) and checks them with
#       `dataecho experiment --dry-run` (the learning rates it would take, the stages):
#       no shards, no server, no training (tests/cli/demo_config_test.sh).
#   experiments/protocol/run.sh controls [dataecho experiment flags]
#       the controls of docs/protocol.md that need no tuning of their own
#       (controls.json): A1, echoing after augmentation at e = 2 and 4, seeds 1-10, and C,
#       the baseline and e = 4 before augmentation at step budgets 1,950, 2,925 and
#       5,850, seeds 1-5; every run to its budget (snapshots), on local shards, at the
#       sweep's tuned rates. Compute-bound and resumable like the sweep (the data order
#       of a fixed factor does not depend on timing), in $PROTOCOL_OUT/controls.
#   experiments/protocol/run.sh retune [dataecho experiment flags]
#       the controls with tuning of their own (retune.json): B, the baseline and
#       e = 4 before augmentation re-tuned over rates x weight decays (tuning seeds
#       101-104, chosen by the held reading, one group per variant), and A2, batch
#       augmentation at batch 256; final seeds 1-10 of the winners. Resumable likewise.
#   experiments/protocol/run.sh budgets [dataecho experiment flags]
#       the final runs of each cell at its own best budget (docs/protocol.md): the
#       baseline, e = 4 and e = 5 each at the budget control C's rule chooses
#       (python3 -m experiments.protocol.controls budget-cells, from the
#       committed controls: run `controls` and `collect` first), over the network at R
#       about 5 with network-r5's calibration (bandwidth and URL), seeds 1-10
#       (budgets.json, in network-budgets-r5/); a cell whose budget is 3,900 has its runs
#       in network-r5 already. Resumable like the network runs.
#   experiments/protocol/run.sh collect
#       adds the finished runs' files (result.json, summary.json, evals.jsonl: small) to
#       results/protocol/<experiment>/runs.jsonl.xz (experiments/archive.py), where they
#       are committed; a run archived already stays, one whose files differ is an error.
#   experiments/protocol/run.sh report [dataecho experiment flags]
#       every table and plot of results/protocol/ (and of the committed demo run,
#       results/demo/) recomputed from the committed runs alone (trains nothing, needs
#       no shards), with results/protocol/targets/ (the swing, and
#       reduction and speedup against the target under both readings of docs/protocol.md:
#       python3 -m experiments.protocol.swing and experiments.protocol.targets, with numpy
#       and the dataecho package's statistics).
# DATAECHO_BIN: the binary to run, by default build/bin/dataecho. To keep a long run
# from seeing rebuilds, copy build/bin/dataecho-train (it has every command; a copy of
# dataecho alone cannot find dataecho-train for its training commands) and name it here,
# with the commit it was built from in DATAECHO_BIN.commit (the runs record it:
# scripts/run_files.sh experiment_setup).
# Output: out/protocol/ (PROTOCOL_OUT): shards/, config/, sweep/ (cells/<id>/[tune/lr-*/]
# seed-*/{result.json,summary.json,evals.jsonl}, results.csv, results.json, plots/).
# The shards are named relative to the config folder (../shards), so a run's recorded
# config does not depend on where the checkout is: the committed files report anywhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"  # the dataecho package (statistics)
PART="${1:-}"
shift || true
OUT="${PROTOCOL_OUT:-out/protocol}"
BIN="${DATAECHO_BIN:-$PWD/build/bin/dataecho}"
FASHION=/usr/share/datasets/fashion-mnist
# The final seeds of the network runs' baseline, e = 4 and a-priori cells in the shared
# setup (render_network): section 6's 1-5 (FIVE_SEEDS, every other network cell's) and the
# controls' 6-10.
FIVE_SEEDS="1, 2, 3, 4, 5"
NETWORK_SEEDS="1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
[[ -x "$BIN" ]] || { echo "protocol: no $BIN (scripts/bootstrap.sh builds it, or set DATAECHO_BIN)" >&2; exit 1; }
case "$PART" in
  sweep | collect | report | network | demo | controls | retune | budgets) ;;
  *) sed -n '/^set -euo/q; 2,$p' "$0" >&2; exit 2 ;;
esac
source scripts/run_files.sh
# The configs go to $CFG/config*/ with @OUT@ = $ROUT.
experiment_setup "$PART" results/protocol
# The committed runs, unpacked from each experiment's archive into its cells/ (git-ignored):
# the report, the runs that join the committed ones and the demo's learning rates read them.
unpack_runs results/protocol/*/ results/demo
# render_train DIR SHARDS: the training, validation, test and base configs in DIR, with
# the training shards read from SHARDS (a folder or a URL).
render_train() {
  mkdir -p "$1"
  for f in train validation test base; do
    sed -e "s#@SHARDS@#$2#g" "experiments/protocol/$f.json" >"$1/$f.json"
  done
}

DRY=0
[[ "$PART" == demo && "${1:-}" == --dry-run ]] && DRY=1
SMOKE="${DEMO_SMOKE:-0}"
[[ "$SMOKE" == 0 || "$PART" == demo ]] || { echo "protocol: DEMO_SMOKE is for the demo" >&2; exit 2; }
# The demo's budget and schedule (demo.json's @STOP@ and @DECAY@), its target and its
# training images; the smoke mode's are tiny.
if [[ "$SMOKE" == 1 ]]; then
  DEMO_STOP=60 DEMO_DECAY=60 TRAIN_IMAGES=4096 DEMO_TARGET="${DEMO_TARGET:-0.7}" CAL_STEPS="${CAL_STEPS:-20}"
  export CALIBRATE_ATTEMPTS=1 CALIBRATE_TOLERANCE=100
else
  DEMO_STOP=2600 DEMO_DECAY=3900 TRAIN_IMAGES=50000
fi
DEMO_TARGET="${DEMO_TARGET:-0.89}"
# The train step on CPU_SPLIT CPUs of its own, the pipeline on the rest (the split setup); 0: shared.
CPU_SPLIT="${CPU_SPLIT:-0}"
[[ "$CPU_SPLIT" =~ ^[0-9]+$ ]] || { echo "protocol: CPU_SPLIT is a number of CPUs, got '$CPU_SPLIT'" >&2; exit 2; }

# render_demo FACTOR URL [OUT]: the demo's configs in $CFG/config-demo/ (the training
# shards at URL, the a-priori e = FACTOR, output in OUT/demo, by default $OUT/demo), at the
# learning rates of the committed sweep.
render_demo() {
  render_train "$CFG/config-demo" "$2"
  sed -e "s#@FACTOR@#$1#g" -e "s#@MAX_FACTOR@#$(($1 + 1))#g" -e "s#@TARGET@#$DEMO_TARGET#g" \
    -e "s#@STOP@#$DEMO_STOP#g" -e "s#@DECAY@#$DEMO_DECAY#g" \
    -e "s#@OUT@#${3:-$OUT}#g" experiments/protocol/demo.json >"$CFG/config-demo/demo.json"
}

# setup_of SPLIT: the name part of a setup: "" (shared cores) or "-split" (the split setup).
setup_of() { [[ "${1:-0}" == 0 ]] || echo -split; }
# render_network R FACTOR URL [SPLIT]: the network runs' configs in $CFG/config-rR/, or
# with SPLIT N (the train step on N CPUs of its own: the split setup) in $CFG/config-split-rR/;
# NETWORK_CFG names the rendered network.json.
render_network() {
  local setup overrides=""
  setup="$(setup_of "${4:-0}")"
  # The train step's LibTorch threads: as many as its CPUs (the split setup runs "with
  # LibTorch's 1 thread"); the base config's 2 threads on 1 CPU made each step 10 times slower.
  [[ -z "$setup" ]] || overrides=", \"cpu_split\": $4, \"threads\": $4"
  local dir="$CFG/config$setup-r$1"
  NETWORK_CFG="$dir/network.json"
  # The grid: the baseline, the a-priori e and e = 4, on NETWORK_SEEDS in the shared setup
  # (seeds 1-10) and on 1-5 with the split; e = 2, when it is not the a-priori
  # e, is a cell of its own on seeds 1-5 (as are batch echoing and adaptive).
  local factors="$2" cells="" seeds="$NETWORK_SEEDS"
  [[ $2 == 4 ]] || factors="$factors, 4"
  [[ $2 == 2 ]] || cells="{\"variant\": \"example_before_augmentation\", \"factor\": 2, \"shuffle_after_echo\": 1000, \"seeds\": [$FIVE_SEEDS]},"
  [[ -z "$setup" ]] || seeds="$FIVE_SEEDS"
  render_train "$dir" "$3"
  sed -e "s#@R_GOAL@#$1#g" -e "s#@FACTOR@#$2#g" -e "s#@MAX_FACTOR@#$(($2 + 1))#g" \
    -e "s#@FACTORS@#$factors#g" -e "s#@SEEDS@#$seeds#g" -e "s#@FIVE_SEEDS@#$FIVE_SEEDS#g" -e "s#@OUT@#$ROUT#g" -e "s#@SETUP@#$setup#g" \
    -e "s#@OVERRIDES@#$overrides#g" -e "s#@CELLS@#$cells#g" \
    experiments/protocol/network.json >"$dir/network.json"
}
# render_budgets URL: the config of each cell at its own best budget in
# $CFG/config-budgets-r5/ (BUDGETS_CFG), its cells from the chosen budgets (control C's
# rule on the committed runs: experiments/protocol/controls.py): each cell whose budget is
# not 3,900, with its decay ending at its budget, seeds 1-10.
render_budgets() {
  local dir="$CFG/config-budgets-r5" cells
  BUDGETS_CFG="$dir/budgets.json"
  cells="$(/usr/bin/python3 -m experiments.protocol.controls budget-cells --root results/protocol)" || exit 1
  render_train "$dir" "$1"
  sed -e "s#@CELLS@#${cells%%$'\t'*}#" -e "s#@MAP@#${cells#*$'\t'}#" -e "s#@OUT@#$ROUT#g" \
    experiments/protocol/budgets.json >"$BUDGETS_CFG"
}
mkdir -p "$CFG/config"
for f in experiments/protocol/*.json; do
  sed -e "s#@SHARDS@#../shards#g" -e "s#@OUT@#$ROUT#g" "$f" >"$CFG/config/$(basename "$f")"
done
if [[ "$PART" == collect ]]; then
  for exp in "$OUT"/sweep "$OUT"/network-r* "$OUT"/network-split-r* "$OUT"/network-budgets-r5 "$OUT"/controls "$OUT"/retune; do
    [[ -d "$exp/cells" ]] || continue
    dest="results/protocol/$(basename "$exp")"
    /usr/bin/python3 -m experiments.archive collect "$exp" "$dest"
    [[ -f "$exp/calibration.txt" ]] && cp "$exp/calibration.txt" "$dest/"
    [[ -f "$exp/calibration_runs.txt" ]] && cp "$exp/calibration_runs.txt" "$dest/"
  done
  exit 0
fi
if [[ "$PART" == report ]]; then
  mkdir -p "$ROUT/sweep"
  "$BIN" experiment "$CFG/config/sweep.json" --report-only "$@" | tee "$ROUT/sweep/table.txt"
  for dir in "$ROUT"/network-r* "$ROUT"/network-split-r*; do
    [[ -d "$dir" ]] || continue
    r="${dir##*-r}"
    split="$(calibration_value "$dir/calibration.txt" "cpu split" 0)"
    render_network "$r" "$(calibration_value "$dir/calibration.txt" factor)" "$(calibration_value "$dir/calibration.txt" url)" "$split"
    "$BIN" experiment "$NETWORK_CFG" --report-only "$@" | tee "$dir/table.txt"
  done
  if [[ -d "$ROUT/network-budgets-r5/cells" ]]; then
    render_budgets "$(calibration_value "$ROUT/network-budgets-r5/calibration.txt" url)"
    "$BIN" experiment "$BUDGETS_CFG" --report-only "$@" | tee "$ROUT/network-budgets-r5/table.txt"
  fi
  for part in controls retune; do
    if [[ -d "$ROUT/$part/cells" ]]; then
      "$BIN" experiment "$CFG/config/$part.json" --report-only "$@" | tee "$ROUT/$part/table.txt"
    fi
  done
  # The committed demo run (results/demo), at the target it ran with (in its config).
  if [[ -f results/demo/calibration.txt ]]; then
    cal=results/demo/calibration.txt
    DEMO_TARGET="$(/usr/bin/python3 -m experiments.runfiles value results/demo/cells/baseline/seed-1/result.json \
      config.target_accuracy)"
    render_demo "$(calibration_value "$cal" factor)" "$(calibration_value "$cal" url)" results
    "$BIN" experiment "$CFG/config-demo/demo.json" --report-only "$@" | tee results/demo/table.txt
  fi
  # Against the target, under the first touch and the held rule of docs/protocol.md
  # (results/protocol/targets/): Debian's python3 with numpy and the dataecho package's
  # statistics, from the same run files.
  /usr/bin/python3 -m experiments.protocol.swing
  /usr/bin/python3 -m experiments.protocol.targets
  exit 0
fi

# The first 50,000 training images (the smoke demo's first 4,096) as 8 PNG TFRecord
# shards; the last 10,000 are the validation split (validation.json reads them from the
# IDX file). .done holds the number of images (empty in folders of the 50,000 from
# before it did).
shards_done="$( [[ -f "$OUT/shards/.done" ]] && cat "$OUT/shards/.done" || echo none)"
if [[ $DRY == 0 && "${shards_done:-50000}" != "$TRAIN_IMAGES" ]]; then
  rm -rf "$OUT/shards"
  "$BIN" convert --images "$FASHION/train-images-idx3-ubyte.gz" --labels "$FASHION/train-labels-idx1-ubyte.gz" \
    --to tfrecord --out "$OUT/shards" --name train --shards 8 --encode png --limit "$TRAIN_IMAGES"
  echo "$TRAIN_IMAGES" >"$OUT/shards/.done"
fi
# Runs finished on another machine and committed (run.sh collect) are not redone: their
# files join the output folder unless a run of the same name is there already. The network
# runs and the demo take their learning rates from them (on a machine without the sweep's
# own output they found none: "the sweep has not chosen the baseline's learning rate").
# join_committed EXP: the committed runs of results/protocol/EXP join $OUT/EXP, with a
# network part's calibration (bandwidth, URL, a-priori e) where $OUT/EXP has none, so that
# seeds added later run where the first ones did.
join_committed() {
  local from="results/protocol/$1" f
  if [[ -d "$from/cells" ]]; then
    mkdir -p "$OUT/$1"
    cp -rn "$from/cells" "$OUT/$1/"
    for f in calibration.txt calibration_runs.txt; do
      [[ -f "$OUT/$1/$f" || ! -f "$from/$f" ]] || cp "$from/$f" "$OUT/$1/$f"
    done
  fi
}
[[ ! "$PART" =~ ^(sweep|demo|network|controls|retune|budgets)$ ]] || join_committed sweep
if [[ $DRY == 1 ]]; then
  render_demo "${DEMO_FACTOR:-5}" http://127.0.0.1:9
  exec "$BIN" experiment "$CFG/config-demo/demo.json" --dry-run
fi
if [[ "$PART" =~ ^(sweep|controls|retune)$ ]]; then
  # The controls' committed runs join their output folder as the sweep's do.
  [[ "$PART" == sweep ]] || join_committed "$PART"
  echo "protocol $PART: commit $DATAECHO_COMMIT, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
  exec "$BIN" experiment "$CFG/config/$PART.json" --progress lines "$@"
fi

# ---- network R, demo ----
if [[ "$PART" == demo ]]; then
  R_GOAL="${DEMO_R:-5}"
  EXP="$OUT/demo"
  PREFERRED_PORT=28530
elif [[ "$PART" == budgets ]]; then
  # Each cell at its own budget: at network-r5's calibration, on its port (the same URL).
  R_GOAL=5
  EXP="$OUT/network-budgets-r5"
  PREFERRED_PORT=28545
  join_committed network-budgets-r5
  mkdir -p "$EXP"
  [[ -f "$EXP/calibration.txt" ]] || cp results/protocol/network-r5/calibration.txt "$EXP/"
else
  R_GOAL="${1:-}"
  shift || true
  EXP="$OUT/network$(setup_of "$CPU_SPLIT")-r$R_GOAL"
  # nginx on loopback: start_server / stop_server of experiments/network_lib.sh, on a port
  # of its own that stays the same from one invocation to the next when it is free (the
  # URL is part of every run's recorded config: a new one would start the runs over).
  PREFERRED_PORT=$((28540 + R_GOAL))
  [[ "$CPU_SPLIT" == 0 ]] || PREFERRED_PORT=$((28550 + R_GOAL))
fi
[[ "$R_GOAL" =~ ^[0-9]+$ && "$R_GOAL" -ge 1 ]] || { echo "protocol: network takes R (an integer, 5 or 2)" >&2; exit 2; }
mkdir -p "$EXP"
# The added seeds' own R in training is in their summaries.
[[ "$PART" != network ]] || join_committed "$(basename "$EXP")"
CAL="$EXP/calibration.txt"
# shellcheck source=../network_lib.sh
source experiments/network_lib.sh
trap stop_server EXIT
# measure_r SHARDS: R of the baseline (tuned rate) in a short training run whose
# pipeline reads SHARDS (a folder or the URL), beside the train step as in the runs.
CAL_STEPS="${CAL_STEPS:-200}"
measure_r() {
  render_train "$CFG/config-calibrate-r$R_GOAL" "$1"
  rm -rf "$EXP/calibrate"
  "$BIN" train --config "$CFG/config-calibrate-r$R_GOAL/base.json" --max-steps "$CAL_STEPS" --eval-every 0 \
    --eval-every-fresh 0 --lr "$BASE_LR" --cpu-split "$CPU_SPLIT" $([[ "$CPU_SPLIT" == 0 ]] || echo --threads "$CPU_SPLIT") \
    --progress off --out "$EXP/calibrate" >/dev/null
  run_value "$EXP/calibrate/summary.json" r_estimate
}
# The baseline's tuned rate from the sweep (BASE_LR overrides it: for trying the
# calibration before the sweep has one; the runs themselves always use the sweep's).
BASE_LR="${BASE_LR:-$("$BIN" experiment "$CFG/config/sweep.json" --report-only --no-plots --json |
  /usr/bin/python3 -m experiments.runfiles lr - baseline)}"
[[ -n "$BASE_LR" ]] || { echo "protocol: the sweep has not chosen the baseline's learning rate yet" >&2; exit 1; }
if [[ -f "$CAL" ]]; then
  RATE="$(calibration_value "$CAL" rate)"
  R_CAL="$(calibration_value "$CAL" R)"
  echo "== calibration from $CAL: $RATE bytes/s per connection, R $R_CAL"
else
  echo "== calibrating: a baseline step with local shards (no throttle)"
  measure_r ../shards >/dev/null
  BYTES="$(cat "$OUT"/shards/*.tfrecord | wc -c)"
  # 4 connections (the interleave cycle); a batch of 128 must take R steps to arrive
  RATE="$(cal first-rate "$EXP/calibrate/summary.json" "$CAL_STEPS" "$BYTES" "$TRAIN_IMAGES" "$R_GOAL" 4 128)"
  if ! search_bandwidth "$R_GOAL" "$RATE" "$EXP/calibration_runs.txt" "$OUT/shards" " per connection x 4"; then
    # The experiment needs its R; the demo goes on at the closest, and says so.
    [[ "$PART" == demo ]] || { echo "protocol: $CAL_FAIL" >&2; exit 1; }
    echo "demo: $CAL_FAIL: going on at $RATE bytes/s per connection, R = $R_CAL"
  fi
  FACTOR="$(cal factor "$R_CAL")"
  if [[ "$CPU_SPLIT" == 0 ]]; then where="trainer and pipeline on the same $(nproc) cores"; else where="the train step on $CPU_SPLIT CPU(s) of its own, the pipeline on the rest"; fi
  extra=()
  [[ "$CPU_SPLIT" == 0 ]] || extra=("cpu split: $CPU_SPLIT")
  write_calibration "$CAL" "$CAL_STEPS-step baseline training runs over the throttled shards, $where; the median of ${CALIBRATE_ATTEMPTS:-3} at each bandwidth (calibration_runs.txt has every run)" \
    "${extra[@]}"
fi
FACTOR="$(calibration_value "$CAL" factor)"
start_server "$RATE"
URL="$BASE_URL"
if [[ "$URL" != "$(calibration_value "$CAL" url)" ]]; then
  echo "protocol: port $PREFERRED_PORT is taken: serving at $URL, so runs recorded with the old URL start over" >&2
fi
if [[ "$PART" == demo ]]; then
  # The sweep tuned e = 2..6 before augmentation: a larger a-priori e takes 6.
  [[ "$FACTOR" -le 6 ]] || { echo "demo: R $R_CAL would take e = $FACTOR; the sweep tuned up to 6, so e = 6"; FACTOR=6; }
  render_demo "$FACTOR" "$URL"
  # The caveats name the demo's budget and schedule as its config (demo.json) sets them.
  STOP="$(run_value "$CFG/config-demo/demo.json" overrides.max_steps)"
  DECAY="$(run_value "$CFG/config-demo/demo.json" overrides.optimizer.decay_steps)"
  echo "== demo runs at R = $R_CAL (goal $R_GOAL), a-priori e = $FACTOR, $RATE bytes/s per connection x 4"
  status=0
  "$BIN" experiment "$CFG/config-demo/demo.json" --progress lines "$@" | tee "$EXP/table.txt" || status=$?
  cat <<EOF

== data echoing over a throttled network: Fashion-MNIST, the protocol's CNN, one seed$([[ "$SMOKE" == 0 ]] || printf '\n   SMOKE MODE: %s training images, every step on tiny budgets; the figures mean nothing' "$TRAIN_IMAGES")
   A demonstration, not the experiment: 1 seed, and a demo target of $(cal percent "$DEMO_TARGET")% validation
   accuracy (the experiment's: 90%). The runs use the experiment's settings (its tuned
   learning rates: the baseline's, e = $FACTOR's, also for adaptive; its schedule, decaying
   to 0 at step $DECAY) but stop at step $STOP. The experiment, 5 seeds per cell with 95%
   intervals: docs/results.md.
   Bandwidth $RATE bytes/s per connection x 4; R in $CAL_STEPS-step calibration runs (median of ${CALIBRATE_ATTEMPTS:-3}): $R_CAL.
   Speedup = the baseline's wall-clock time to the target over the run's, from building
   the pipeline; the snapshots were evaluated after training, off the clock.
   ideal = min(achieved echo factor, the baseline's R in training).
   table:   $EXP/table.txt, $EXP/results.csv, $EXP/results.json
   plots:   $EXP/plots/ (fresh_vs_factor, accuracy_vs_fresh, speedup_vs_factor; .png, .svg)
   runs:    $EXP/cells/*/seed-1/ (evals.jsonl, summary.json, result.json)
EOF
  # Beside this one seed: the committed network runs under the demo's own settings
  # (results/protocol/targets/demo_reference.json, from `run.sh report`; its lines say
  # how many seeds).
  ref=results/protocol/targets/demo_reference.json
  if [[ -f "$ref" ]]; then
    echo
    echo "== for comparison: the same settings in the committed network runs"
    run_value "$ref" print | sed 's/^/   /'
  fi
  exit "$status"
fi
if [[ "$PART" == budgets ]]; then
  render_budgets "$URL"
  echo "== each cell at its own budget at R = $R_CAL (goal 5), $RATE bytes/s per connection x 4: $BUDGETS_CFG"
  "$BIN" experiment "$BUDGETS_CFG" --progress lines "$@"
  exit 0
fi
render_network "$R_GOAL" "$FACTOR" "$URL" "$CPU_SPLIT"
echo "== network runs at R = $R_CAL (goal $R_GOAL), a-priori e = $FACTOR, $RATE bytes/s per connection x 4$([[ "$CPU_SPLIT" == 0 ]] || echo ", the train step on $CPU_SPLIT CPU(s) of its own")"
"$BIN" experiment "$NETWORK_CFG" --progress lines "$@"
