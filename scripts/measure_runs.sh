#!/usr/bin/env bash
# scripts/measure_runs.sh LIB[,LIB...] NAME...: whole runs of the workload kit without an agent
# and with each agent LIB in full encoding (every class, no sampling), one after the other per
# workload (interleaved, so that a noisy machine hits every build alike). Prints per run the wall
# seconds (the kit's own figure), CPU seconds (user + sys of the whole process tree) and peak RSS,
# and, for the runs with an agent, what `lucce stats` says of the stores they wrote (summed over
# the JVMs of the run): bytes on disk, graph versions, edges, anchors. Then per workload and
# agent the mean wall ratio and RSS difference against the runs without and the stores' means,
# and per agent the geometric mean of the ratios. The agents are named lib1, lib2, ... in the
# order given. Every run must have rc=0 and check=ok (exit status 1 otherwise).
# Needs /usr/bin/time (Debian package `time`). Variables: ROUNDS (1), WL_KIT, WL_DIR as in
# scripts/compare_agents.sh; LUCCE, the CLI (default target/release/lucce; without it the store
# columns are empty); PIN_HEAP, a heap size such as 2g: every run, with or without an agent, gets
# a Java heap of exactly that size, touched at start (-Xms -Xmx -XX:+AlwaysPreTouch), so that
# the RSS difference is the agent's own memory and not how far the heap happened to grow (h2's
# varies by hundreds of MB between runs). The kit's javac runs with -Xmx2g: pin at most that.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 2 ]] || { echo "usage: $0 LIB[,LIB...] NAME..." >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "$0: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
ROUNDS=${ROUNDS:-1}
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
read_libs "$1"
shift
warn_unless_tmpfs "$WL_DIR"
LUCCE=${LUCCE:-$REPO/target/release/lucce}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
printf '%-14s %-6s %8s %8s %9s %9s %10s %8s %8s\n' workload agent wall_s cpu_s rss_mb store_mb versions edges anchors
for _ in $(seq 1 "$ROUNDS"); do
  for name in "$@"; do
    for i in $(seq 0 "${#libs[@]}"); do
      opts="${PIN_HEAP:+-Xms$PIN_HEAP -Xmx$PIN_HEAP -XX:+AlwaysPreTouch}" agent=no
      if ((i > 0)); then
        opts+=" -agentpath:${libs[i - 1]}=out=$work/store/%p,summary=off${lib_opts[i - 1]}" agent=lib$i
      fi
      line=$(LUCCE_JAVA_OPTS="$opts" /usr/bin/time -o "$work/time" -f '%U %S %M' \
        "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
      [[ $line == *"rc=0 "*"check=ok"* ]] || { echo "$name $agent: ${line:-no result}" >&2; status=1; }
      wall=$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' <<<"$line")
      read -r user sys rss_kb <"$work/time"
      # The stores of this run (one per JVM), summed.
      stores="- - - -"
      if ((i > 0)) && [[ -x $LUCCE ]]; then
        stores=$(for s in "$work"/store/*; do [[ -d $s ]] && "$LUCCE" stats "$s"; done |
          awk '/^bytes on disk/ { b += $4 } /^graph versions/ { v += $3 } /^edges/ { e += $2 }
            /^anchors/ { a += $2 } END { printf "%.1f %d %d %d", b / 1e6, v, e, a }')
      fi
      awk -v n="$name" -v a="$agent" -v w="${wall:-0}" -v u="$user" -v s="$sys" -v r="$rss_kb" -v st="$stores" \
        'BEGIN { split(st, x, " ")
          printf "%-14s %-6s %8.2f %8.2f %9.0f %9s %10s %8s %8s\n", n, a, w, u + s, r / 1024, x[1], x[2], x[3], x[4] }' |
        tee -a "$work/rows"
      rm -rf "${work:?}/store"
    done
  done
done
# Means per workload and agent, in the order the runs came.
awk '$3 > 0 { k = $1 SUBSEP $2; if (!c[k]++) { order[++o] = k }; w[k] += $3; r[k] += $5; b[k] += $6; v[k] += $7; e[k] += $8; an[k] += $9 }
  END {
    for (i = 1; i <= o; i++) {
      split(order[i], p, SUBSEP); base = p[1] SUBSEP "no"
      if (p[2] == "no" || !c[base]) continue
      q = (w[order[i]] / c[order[i]]) / (w[base] / c[base]); l[p[2]] += log(q); m[p[2]]++
      n = c[order[i]]
      printf "%-14s %-6s ratio %.2f, peak RSS %+.0f MB, store %.1f MB, %d versions, %d edges, %d anchors\n", p[1], p[2], q,
        r[order[i]] / n - r[base] / c[base], b[order[i]] / n, v[order[i]] / n, e[order[i]] / n, an[order[i]] / n
    }
    for (a = 1; ("lib" a) in m; a++) printf "lib%d: geometric mean of the wall ratios: %.2f\n", a, exp(l["lib" a] / m["lib" a])
  }' "$work/rows"
exit $status
