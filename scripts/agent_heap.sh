#!/usr/bin/env bash
# scripts/agent_heap.sh NAME...: what holds the agent's own heap at the end of a full-encoding
# run (every class, no sampling) of each workload NAME of the kit. Builds the agent with the
# cargo feature `alloc-stats` (agent/src/alloc_stats.rs: a counting global allocator) into
# target/alloc-stats, runs NAME with it once (`out=` a temporary store), and prints the report
# the agent wrote at VMDeath: the bytes the library had allocated and not freed, malloc's
# figures for the whole process, and the library's blocks of 64 KiB or more (or
# LUCCE_ALLOC_STATS_MIN bytes) by allocation site, each with how much of it was resident. The run's own
# time and peak RSS are not the product's (a backtrace per large block, and the report loads
# the library's debug information): use scripts/measure_runs.sh or memory_breakdown.sh for those.
# Variables: WL_KIT, WL_DIR as in scripts/measure_runs.sh; TOP, the sites printed per workload
# (default 15); LUCCE_ALLOC_STATS_MIN, the smallest block given a site (bytes, default 65536;
# small ones slow the run down by a backtrace per allocation). Exit status 1 if a run fails its check or writes no report.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 1 ]] || { echo "usage: $0 NAME..." >&2; exit 2; }
TOP=${TOP:-15}
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
(cd "$REPO" && cargo build --release --quiet -p lucce-agent --features alloc-stats --target-dir target/alloc-stats) || exit 2
lib=$REPO/target/alloc-stats/release/liblucce_agent.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for name in "$@"; do
  line=$(LUCCE_JAVA_OPTS="-agentpath:$lib=out=$work/store/%p,summary=off" \
    "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
  [[ $line == *"rc=0 "*"check=ok"* ]] || { echo "$name: ${line:-no result}" >&2; status=1; }
  echo "== $name"
  # One report per JVM of the run (the kit's wrappers may start more than one); not from the
  # start of a line, which a program's output may not have ended (h2's).
  grep -ho 'lucce-agent heap: .*' "$WL_DIR/logs/$name.log" | awk -v top="$TOP" '/live at VMDeath/ { n = -1 } n++ <= top' |
    sed 's/^lucce-agent heap: //' | grep . || { echo "$name: no heap report in $WL_DIR/logs/$name.log" >&2; status=1; }
  rm -rf "${work:?}/store"
done
exit $status
