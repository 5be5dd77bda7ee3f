#!/usr/bin/env bash
# scripts/measure_runs.sh LIB NAME...: whole runs of the workload kit without an agent and with
# agent LIB in full encoding (every class, no sampling), one after the other per workload. Prints
# per run the wall seconds (the kit's own figure), CPU seconds (user + sys of the whole process
# tree) and peak RSS, then per workload the wall ratio and the RSS difference, and the geometric
# mean of the ratios. Every run must have rc=0 and check=ok (exit status 1 otherwise).
# Needs /usr/bin/time (Debian package `time`). Variables: WL_KIT, WL_DIR as in
# scripts/compare_agents.sh.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 2 ]] || { echo "usage: $0 LIB NAME..." >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "$0: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
lib=$(realpath "$1")
shift
WL_KIT=${WL_KIT:-$REPO/../shared/workloads}
[[ -x $WL_KIT/run.sh ]] || WL_KIT=/work/shared/workloads
WL_DIR=${WL_DIR:-$HOME/.cache/lucce-workloads}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
printf '%-14s %-6s %8s %8s %9s\n' workload agent wall_s cpu_s rss_mb
for name in "$@"; do
  for with in no yes; do
    opts=""
    [[ $with == yes ]] && opts="-agentpath:$lib=out=$work/store/%p,summary=off"
    line=$(LUCCE_JAVA_OPTS="$opts" /usr/bin/time -o "$work/time" -f '%U %S %M' \
      "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
    [[ $line == *"rc=0 "*"check=ok"* ]] || { echo "$name agent=$with: ${line:-no result}" >&2; status=1; }
    wall=$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' <<<"$line")
    read -r user sys rss_kb <"$work/time"
    awk -v n="$name" -v a="$with" -v w="${wall:-0}" -v u="$user" -v s="$sys" -v r="$rss_kb" \
      'BEGIN { printf "%-14s %-6s %8.2f %8.2f %9.0f\n", n, a, w, u + s, r / 1024 }' | tee -a "$work/rows"
    rm -rf "${work:?}/store"
  done
done
awk '$2 == "no" { w[$1] = $3; r[$1] = $5 }
  $2 == "yes" && w[$1] > 0 { q = $3 / w[$1]; l += log(q); k++
    printf "%-14s ratio %.2f, peak RSS %+.0f MB\n", $1, q, $5 - r[$1] }
  END { if (k) printf "geometric mean of the wall ratios: %.2f\n", exp(l / k) }' "$work/rows"
exit $status
