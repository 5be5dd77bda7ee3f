#!/usr/bin/env bash
# scripts/class_times.sh LIB NAME...: which classes the load hook's time goes to, per workload of
# the kit. One run of each NAME with agent LIB in counting mode (`-Xverify:all`, as
# scripts/rewrite_time.sh runs it), its log at debug level, where the hook writes each class's
# CPU time ("class time: NAME NS ns of CPU"). Prints per workload the classes, those from the
# JDK's image (by name: java/ javax/ jdk/ sun/ com/sun/ org/w3c/dom/ org/xml/sax/ org/ietf/,
# without the lambda forms and lambda proxies the JVM generates), their share of the CPU time,
# the CPU seconds per 10k classes, and what they would be without the JDK's classes (what
# rewriting those once, docs/agent.md, "Real programs", would leave to the hook).
# Every run must have rc=0 and check=ok (exit status 1 otherwise; as in rewrite_time.sh,
# lucene_search's check fails on some machines without an agent too).
# Variables: WL_KIT, WL_DIR as in scripts/compare_agents.sh.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 2 ]] || { echo "usage: $0 LIB NAME..." >&2; exit 2; }
lib=$(realpath -e "$1") || exit 2
shift
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
printf '%-14s %8s %8s %10s %12s %12s\n' workload classes jdk jdk_cpu_% s_per_10k without_jdk
for name in "$@"; do
  rm -f "$work"/*.log
  line=$(LUCCE_JAVA_OPTS="-agentpath:$lib=summary=off,json=/dev/null,loglevel=debug,log=$work/%p.log -Xverify:all" \
    "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
  [[ $line == *"rc=0 "*"check=ok"* ]] || { echo "$name: ${line:-no result}" >&2; status=1; }
  cat "$work"/*.log 2>/dev/null | awk -v w="$name" '
    / class time: / {
      for (i = 1; i <= NF; i++) if ($i == "time:") { c = $(i + 1); ns = $(i + 2) }
      n++; t += ns
      if (c ~ /LambdaForm\$|\$\$Lambda|Species_|<unnamed>/) next
      if (c ~ /^(java|javax|jdk|sun|com\/sun|org\/w3c\/dom|org\/xml\/sax|org\/ietf)\//) { j++; tj += ns }
    }
    END {
      if (n == 0 || t == 0) { printf "%-14s no class times in the log\n", w; exit }
      printf "%-14s %8d %8d %10.0f %12.3f %12.3f\n", w, n, j, 100 * tj / t, t / n * 1e4 / 1e9, (t - tj) / n * 1e4 / 1e9
    }'
done
exit $status
