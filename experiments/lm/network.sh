# The network part of experiments/lm/run.sh (sourced by it: BIN, OUT, CFG, ROUT, render,
# render_network and calibration_value come from there, run_value and the calibration's
# search from experiments/network_lib.sh). docs/lm_protocol.md section 6.
R_GOAL="${1:-}"
shift || true
[[ "$R_GOAL" =~ ^[0-9]+$ && "$R_GOAL" -ge 2 ]] || { echo "lm: network takes R (an integer >= 2, the protocol's 4)" >&2; exit 2; }
SETUP="${LM_SETUP:-}"
[[ "$SETUP" =~ ^[a-z0-9]*$ ]] || { echo "lm: LM_SETUP takes lowercase letters and digits" >&2; exit 2; }
NAME="network${SETUP:+-$SETUP}-r$R_GOAL"
EXP="$OUT/$NAME"
mkdir -p "$EXP"
CAL="$EXP/calibration.txt"
# A port of its own that stays the same from one invocation to the next when it is free
# (the URL is part of every run's recorded config: a new one would start the runs over).
PREFERRED_PORT=$((28560 + R_GOAL))
# shellcheck source=../network_lib.sh
source experiments/network_lib.sh
trap stop_server EXIT
CAL_STEPS="${CAL_STEPS:-600}"
# The sweep's chosen rates: the baseline's for the calibration, e = round(R)'s for the runs.
chosen_lr() {  # chosen_lr CELL
  "$BIN" experiment "$CFG/config/sweep.json" --report-only --no-plots --json 2>/dev/null |
    /usr/bin/python3 -m experiments.runfiles lr - "$1"
}
BASE_LR="${BASE_LR:-$(chosen_lr baseline)}"
[[ -n "$BASE_LR" ]] || { echo "lm: the sweep has not chosen the baseline's learning rate yet" >&2; exit 1; }
# measure_r FOLDER: R of the baseline in a CAL_STEPS-step training run reading the
# training file from FOLDER (../gcide or the served URL), beside the train step as in the
# runs.
measure_r() {
  render "$CFG/config-calibrate-$NAME" "$1" 500
  rm -rf "$EXP/calibrate"
  "$BIN" train --config "$CFG/config-calibrate-$NAME/protocol.json" --max-steps "$CAL_STEPS" \
    --eval-every 0 --eval-every-fresh 0 --lr "$BASE_LR" --progress off --out "$EXP/calibrate" >/dev/null
  run_value "$EXP/calibrate/summary.json" r_estimate
}
if [[ -f "$CAL" ]]; then
  RATE="$(calibration_value "$CAL" rate)"
  R_CAL="$(calibration_value "$CAL" R)"
  echo "== calibration from $CAL: $RATE bytes/s, R $R_CAL"
else
  echo "== calibrating: a baseline step with the local file (no throttle)"
  measure_r ../gcide >/dev/null
  # One connection (one file). Compressed bytes per entry from the split's size and count;
  # a step's fresh entries from the calibration run's.
  BYTES="$(wc -c <"$OUT/gcide/train.jsonl.gz")"
  ENTRIES_ALL="$(run_value "$OUT/gcide/split.json" splits.train.entries)"
  RATE="$(cal first-rate "$EXP/calibrate/summary.json" "$CAL_STEPS" "$BYTES" "$ENTRIES_ALL" "$R_GOAL" 1)"
  search_bandwidth "$R_GOAL" "$RATE" "$EXP/calibration_runs.txt" "$OUT/gcide" "" ||
    { echo "lm: $CAL_FAIL" >&2; exit 1; }
  FACTOR="$(cal factor "$R_CAL")"
  write_calibration "$CAL" "$CAL_STEPS-step baseline training runs reading the throttled file (one connection), trainer and pipeline on the same $(nproc) cores; the median of 3 at each bandwidth (calibration_runs.txt has every run)"
fi
FACTOR="$(calibration_value "$CAL" factor)"
[[ -n "$(chosen_lr "before_pack-e$FACTOR-sb100")" ]] ||
  { echo "lm: the sweep has not chosen before_pack-e$FACTOR-sb100's learning rate yet (the a-priori e = $FACTOR)" >&2; exit 1; }
start_server "$RATE" "$OUT/gcide"
URL="$BASE_URL"
if [[ "$URL" != "$(calibration_value "$CAL" url)" ]]; then
  echo "lm: port $PREFERRED_PORT is taken: serving at $URL, so runs recorded with the old URL start over" >&2
fi
render_network "$NAME" "$R_GOAL" "$FACTOR" "$URL"
echo "== network runs at R = $R_CAL (goal $R_GOAL), a-priori e = $FACTOR, $RATE bytes/s"
"$BIN" experiment "$CFG/config-$NAME/network.json" --progress lines "$@"
