# Sourced by the experiments' run.sh scripts (experiments/protocol, experiments/lm):
# what their parts share.
source "$(dirname "${BASH_SOURCE[0]}")/commit_state.sh"

# experiment_setup PART RESULTS: exports DATAECHO_COMMIT (each run file records the commit
# it ran at, with "-dirty" for uncommitted changes under src, include or experiments) and
# sets CFG, where the rendered configs go, and ROUT, the experiments' output folder the
# configs name (@OUT@): $OUT for both, except that a report reads the committed run files
# (ROUT=RESULTS) with its configs in $OUT/report.
#
# A copy of the trainer named by DATAECHO_BIN was built from some earlier commit, not
# from the checkout's: its runs record the commit in "$DATAECHO_BIN.commit" (written
# beside the copy when it is made, e.g. `commit_state . src include experiments >
# out/bin/dataecho-train-abc1234.commit`), or DATAECHO_COMMIT when set. Without either,
# runs with such a copy are refused.
experiment_setup() {
  if [[ -z "${DATAECHO_COMMIT:-}" && -n "${DATAECHO_BIN:-}" && "$1" != report ]]; then
    if [[ ! -f "$DATAECHO_BIN.commit" ]]; then
      echo "$1: DATAECHO_BIN=$DATAECHO_BIN has no $DATAECHO_BIN.commit naming the commit it was built from (write it, or set DATAECHO_COMMIT)" >&2
      return 1
    fi
    DATAECHO_COMMIT=$(<"$DATAECHO_BIN.commit")
  fi
  export DATAECHO_COMMIT="${DATAECHO_COMMIT:-$(commit_state . src include experiments)}"
  CFG="$OUT"
  ROUT="$OUT"
  if [[ "$1" == report ]]; then
    CFG="$OUT/report"
    ROUT=$2
  fi
}
#
# unpack_runs DIR...: the committed runs of each DIR that has an archive (DIR/runs.jsonl.xz,
# experiments/archive.py) unpacked into DIR (its cells/, git-ignored), checked against the
# manifest: what the report and the runs that join the committed ones read.
unpack_runs() {
  local d
  for d in "$@"; do
    if [[ -f "$d/runs.jsonl.xz" ]]; then /usr/bin/python3 -m experiments.archive unpack "$d"; fi
  done
}
#
# calibration_value FILE KEY [DEFAULT]: one line's value from a network part's
# calibration.txt (experiments/network_lib.sh write_calibration: "KEY: value"), read by
# experiments/runfiles.py; DEFAULT where FILE has no KEY (without one: an error).
calibration_value() {
  /usr/bin/python3 -m experiments.runfiles calibration "$@"
}
