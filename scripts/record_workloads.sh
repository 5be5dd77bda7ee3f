#!/usr/bin/env bash
# scripts/record_workloads.sh [NAME...]: the agent in record mode on the workload kit
# (../shared/workloads; default: all 11 workloads), then `lucce verify` on every store.
#
# Per workload: the kit's check (same output as without the agent), wall time, events, events
# that carry the JVM's own trace, mismatches, graph versions and anchors, store bytes.
# Variables: SAMPLE (1000), VERIFY (20), WL_KIT, WL_DIR (prepared kit dir, ~/.cache/lucce-workloads),
# AGENT_LIB and LUCCE (default: target/release/ of this repo, built here), OUT (results dir),
# TIMEOUT (seconds per workload, 1500), AGENT_OPTS (more agent options, e.g. cache=DIR), JVM_OPTS
# (more JVM options, e.g. -XX:+UseZGC or -Xcomp: the kit's check compares the output with a run
# without them).
# Exit status: 0 only if every run had check=ok and every store verified with 0 mismatches.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
SAMPLE=${SAMPLE:-1000}
VERIFY=${VERIFY:-20}
TIMEOUT=${TIMEOUT:-1500}
OUT=${OUT:-$(mktemp -d /tmp/lucce-record.XXXXXX)}
if [[ -z ${AGENT_LIB:-} || -z ${LUCCE:-} ]]; then
  cargo build --release -q --manifest-path "$REPO/Cargo.toml" -p lucce-agent -p lucce || exit 2
fi
AGENT_LIB=${AGENT_LIB:-$REPO/target/release/liblucce_agent.so}
LUCCE=${LUCCE:-$REPO/target/release/lucce}
# The workloads run in their own directories: relative paths would not be found there.
AGENT_LIB=$(realpath -e "$AGENT_LIB") && LUCCE=$(realpath -e "$LUCCE") || exit 2
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(h2 rhino jython batik fop xalan lucene_index lucene_search javac antlr4 ant)
mkdir -p "$OUT/stores" "$OUT/logs"
status=0
printf '%-14s %-10s %9s %12s %10s %10s %10s %11s %10s %12s\n' workload check wall_s events verified mismatches truncated versions anchors store_bytes
for n in "${names[@]}"; do
  opts="out=$OUT/stores/$n/%p,sample=$SAMPLE,verify=$VERIFY,summary=off,loglevel=info,log=$OUT/logs/$n-%p.txt${AGENT_OPTS:+,$AGENT_OPTS}"
  line=$(LUCCE_JAVA_OPTS="-agentpath:$AGENT_LIB=$opts${JVM_OPTS:+ $JVM_OPTS}" timeout "$TIMEOUT" "$WL_KIT/run.sh" "$n" "$WL_DIR" 2>/dev/null | tail -1)
  check=$(sed -n 's/.*check=\([^ ]*\).*/\1/p' <<<"$line"); wall=$(sed -n 's/.*wall_s=\([^ ]*\).*/\1/p' <<<"$line")
  [[ $check == ok ]] || { check=${check:-timeout}; status=1; }
  ev=0 ver=0 mis=0 tr=0 vs=0 an=0
  for s in "$OUT"/stores/"$n"/*/; do
    [[ -d $s ]] || continue
    v=$("$LUCCE" verify "$s" --show 3 2>&1 | tee "$s.verify.txt" | tail -1)
    read -r e1 _ v1 _ t1 _ < <(sed -n 's/^\([0-9]*\) events, \([0-9]*\) verified (\([0-9]*\) truncated.*/\1 x \2 x \3 x/p' <<<"$v")
    m1=$(sed -n 's/.*, \([0-9]*\) mismatches.*/\1/p' <<<"$v")
    ev=$((ev + ${e1:-0})); ver=$((ver + ${v1:-0})); tr=$((tr + ${t1:-0})); mis=$((mis + ${m1:-0}))
    st=$("$LUCCE" stats "$s" 2>/dev/null)
    v2=$(awk '/^graph versions/ {print $3}' <<<"$st" | head -1); a2=$(awk '/^anchors/ {print $2}' <<<"$st" | head -1)
    vs=$((vs + ${v2:-0})); an=$((an + ${a2:-0}))
  done
  [[ $mis -eq 0 ]] || status=1
  printf '%-14s %-10s %9s %12s %10s %10s %10s %11s %10s %12s\n' "$n" "$check" "${wall:--}" "$ev" "$ver" "$mis" "$tr" "$vs" "$an" \
    "$(du -sb "$OUT/stores/$n" 2>/dev/null | cut -f1)"
done
echo "stores and logs: $OUT"
exit $status
