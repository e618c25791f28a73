# Shared by experiments/protocol/run.sh (network, demo) and experiments/run_network.sh
# (sourced, not run):
# Fashion-MNIST as TFRecord shards served by throttled nginx on loopback, with the
# bandwidth calibrated so that the baseline pipeline's R (upstream time per batch over
# the train step's time) is about R_TARGET, measured with `dataecho profile`.
#
# Needs: BIN (the dataecho binary), OUT (output folder), R_TARGET, MODEL_ARGS (profile
# flags of the model: --model cnn --depth 2 --width 16 --threads 2).
# Sets: BASE_URL, RATE (bytes/s per connection), R_MEASURED, T_DOWN_MS, T_UP_MS.

FASHION=/usr/share/datasets/fashion-mnist
CONNECTIONS=4  # = the interleave cycle of experiments/fashion_http_train.json

run_value() {  # run_value FILE KEY: the value at KEY (a dotted path) of the JSON file FILE
  /usr/bin/python3 -m experiments.runfiles value "$1" "$2"
}

make_shards() {
  local dir="$OUT/shards"
  if [[ -f "$dir/.done" ]]; then
    echo "== shards: $dir (already converted)"
    return
  fi
  echo "== converting Fashion-MNIST (60,000 training images) to 8 TFRecord shards (PNG)"
  rm -rf "$dir"
  "$BIN" convert --images "$FASHION/train-images-idx3-ubyte.gz" \
    --labels "$FASHION/train-labels-idx1-ubyte.gz" --to tfrecord --out "$dir" --name train \
    --shards 8 --encode png
  touch "$dir/.done"
}

# render_config TEMPLATE DEST: copies an experiments/ JSON file with @BASE_URL@ filled in.
render_config() {
  sed -e "s#@BASE_URL@#${BASE_URL}#g" -e "s#@FACTOR@#${FACTOR:-2}#g" \
    -e "s#@MAX_FACTOR@#${MAX_FACTOR:-4}#g" -e "s#@OUT@#${OUT}#g" -e "s#@PWD@#${PWD}#g" "$1" >"$2"
}

free_port() {  # PREFERRED_PORT first when free: the served URL is part of every run's
  # config, so a stable port is what lets a rerun skip the runs already done
  local p
  if [[ -n "${PREFERRED_PORT:-}" ]] && ! (exec 3<>"/dev/tcp/127.0.0.1/$PREFERRED_PORT") 2>/dev/null; then
    echo "$PREFERRED_PORT"
    return
  fi
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "no free port found" >&2
  return 1
}

SERVE_PID=""
stop_server() {
  if [[ -n "$SERVE_PID" ]]; then
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
    SERVE_PID=""
  fi
}

start_server() {  # start_server RATE_BYTES_PER_S [FOLDER, by default $OUT/shards]
  stop_server
  local port
  port="$(free_port)"
  "$BIN" serve "${2:-$OUT/shards}" --port "$port" --rate "$1" >"$OUT/serve.log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 100); do
    if grep -q '^http://' "$OUT/serve.log"; then break; fi
    if ! kill -0 "$SERVE_PID" 2>/dev/null; then
      cat "$OUT/serve.log" >&2
      return 1
    fi
    sleep 0.1
  done
  BASE_URL="http://127.0.0.1:$port"
}

# calibrate: measures the train step (local shards, no throttling), picks the bandwidth
# for R = R_TARGET, serves, measures R over HTTP and corrects the rate (twice at most).
calibrate() {
  mkdir -p "$OUT/config"
  BASE_URL="$OUT/shards"
  [[ "$BASE_URL" = /* ]] || BASE_URL="$PWD/$BASE_URL"
  render_config experiments/fashion_http_train.json "$OUT/config/train_local.json"
  echo "== measuring the train step (dataecho profile, local shards)"
  "$BIN" profile "$OUT/config/train_local.json" $MODEL_ARGS --seconds 3 --steps 30 --json \
    >"$OUT/profile_local.json"
  T_DOWN_MS="$(run_value "$OUT/profile_local.json" downstream_ms_per_batch)"
  local local_up bytes records batch
  local_up="$(run_value "$OUT/profile_local.json" upstream_ms_per_batch)"
  bytes="$(cat "$OUT"/shards/*.tfrecord | wc -c)"
  records=60000
  batch=64
  # bytes/s over all connections so that a batch takes R_TARGET train steps to arrive
  RATE="$(cal rate "$bytes" "$records" "$batch" "$T_DOWN_MS" "$R_TARGET" "$CONNECTIONS" ms)"
  echo "   train step ${T_DOWN_MS} ms/batch; local pipeline ${local_up} ms/batch; $((bytes / records)) bytes/example"
  for attempt in 1 2 3; do
    start_server "$RATE"
    render_config experiments/fashion_http_train.json "$OUT/config/train_http.json"
    echo "== serving $OUT/shards at $BASE_URL, ${RATE} bytes/s per connection x $CONNECTIONS; measuring R (dataecho profile)"
    "$BIN" profile "$OUT/config/train_http.json" $MODEL_ARGS --seconds 8 --steps 30 --json \
      >"$OUT/profile_http.json"
    T_UP_MS="$(run_value "$OUT/profile_http.json" upstream_ms_per_batch)"
    T_DOWN_MS="$(run_value "$OUT/profile_http.json" downstream_ms_per_batch)"
    R_MEASURED="$(cal r "$(run_value "$OUT/profile_http.json" R)")"  # 2 decimals: what the measurement supports
    echo "   upstream ${T_UP_MS} ms/batch, train step ${T_DOWN_MS} ms/batch: R = ${R_MEASURED}"
    if cal within "$R_MEASURED" "$R_TARGET"; then
      break
    fi
    [[ $attempt = 3 ]] && break
    RATE="$(cal adjust "$RATE" "$R_MEASURED" "$R_TARGET")"
  done
}

# search_bandwidth GOAL FIRST_RATE HISTORY FOLDER LABEL: the bandwidth search of
# experiments/protocol/calibrate.py (each bandwidth measured 3 times and its median R
# used, a bracket that is never left, a clear message where the medians contradict each
# other: a machine too loaded to calibrate). Serves FOLDER at each bandwidth it asks for
# and measures R with the caller's `measure_r URL`; HISTORY gets one "RATE R" line per
# measurement, LABEL follows the bandwidth in the progress lines. Sets RATE, R_CAL and
# URL; returns 1 with the search's message in CAL_FAIL when no bandwidth qualifies (RATE
# and R_CAL are then the closest). The search's next step is a function of HISTORY, so an
# interrupted calibration goes on from the measurements it recorded (delete HISTORY to
# start over).
search_bandwidth() {
  local goal=$1 history=$3 folder=$4 label=$5 served="" verb a b rest r
  RATE=$2
  if [[ -s "$history" ]]; then
    echo "   going on from the $(wc -l <"$history") measurements in $history (delete it to start over)"
  fi
  touch "$history"
  while :; do
    read -r verb a b rest < <(/usr/bin/python3 -m experiments.protocol.calibrate next "$goal" "$history" "$RATE")
    case "$verb" in
      measure)
        [[ "$a" == "$served" ]] || { start_server "$a" "$folder"; served="$a"; }
        URL="$BASE_URL"
        r="$(cal r "$(measure_r "$URL")")"
        echo "$a $r" >>"$history"
        echo "   $a bytes/s$label: R = $r (goal $goal)" ;;
      done)
        RATE="$a" R_CAL="$b"
        return 0 ;;
      fail)
        RATE="$a" R_CAL="$b" CAL_FAIL="$rest (every measurement is in $history: delete it to measure again)"
        return 1 ;;
      *) echo "experiments.protocol.calibrate said '$verb $a $b $rest'" >&2; exit 1 ;;
    esac
  done
}

# write_calibration FILE METHOD [LINE...]: the calibration's record, read back by the
# runs and the reports: RATE, R_CAL, FACTOR, URL, BASE_LR and where it ran, with each
# extra LINE before the method.
write_calibration() {
  local file=$1 method=$2
  shift 2
  /usr/bin/python3 -m experiments.runfiles write-calibration "$file" "$method" "$DATAECHO_COMMIT" \
    "$RATE" "$R_CAL" "$FACTOR" "$URL" "$BASE_LR" "$@"
}

# cal ARGS...: the calibration's arithmetic (experiments/protocol/calibrate.py's
# commands: first-rate, rate, within, adjust, factor, r).
cal() {
  /usr/bin/python3 -m experiments.protocol.calibrate "$@"
}
