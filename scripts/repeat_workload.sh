#!/usr/bin/env bash
# scripts/repeat_workload.sh LIB NAME N: runs workload NAME of the kit N times with agent LIB in
# full encoding and prints each run's result line; a run whose kit check is not ok keeps its
# program log and agent log in OUT (default: a new /tmp/lucce-repeat.* dir). Exit status 1 if
# any run failed. Variables: WL_KIT, WL_DIR as in scripts/compare_agents.sh, OUT.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -eq 3 ]] || { echo "usage: $0 LIB NAME N" >&2; exit 2; }
lib=$(realpath "$1") name=$2 n=$3
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
OUT=${OUT:-$(mktemp -d /tmp/lucce-repeat.XXXXXX)}
mkdir -p "$OUT"
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
status=0
for i in $(seq 1 "$n"); do
  rm -rf "${store:?}"/*
  line=$(LUCCE_JAVA_OPTS="-agentpath:$lib=out=$store/%p,summary=off,loglevel=info,log=$store/agent.log" \
    "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
  echo "$i ${line:-no result}"
  if [[ $line != *"rc=0 "*"check=ok"* ]]; then
    status=1
    cp "$WL_DIR/logs/$name.log" "$OUT/$name-run$i.log" 2>/dev/null
    cp "$store/agent.log" "$OUT/agent-run$i.log" 2>/dev/null
    echo "  logs kept in $OUT"
  fi
done
exit $status
