# Sourced by the experiment and benchmark scripts, so that every result file names the
# code it came from the same way.
#
# commit_state DIR [PATH...]: the commit checked out in DIR, with "-dirty" appended when
# a tracked file under PATH... (the whole tree without PATHs) differs from it, so that a
# result measured on uncommitted code says so; "unknown" outside a git checkout.
commit_state() {
  local dir=$1 sha
  shift
  sha=$(git -C "$dir" rev-parse HEAD 2>/dev/null) || { echo unknown; return 0; }
  if git -C "$dir" diff --quiet HEAD -- "$@"; then echo "$sha"; else echo "$sha-dirty"; fi
}
