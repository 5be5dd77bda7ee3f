#!/usr/bin/env bash
# scripts/rewrite_time.sh LIB[+OPTS][,LIB[+OPTS]...] NAME...: the rewrite time of agent builds inside
# real JVMs (OPTS: more agent options, see read_libs in kit.sh).
# Per round and workload, one run with each LIB in counting mode (no `out`, `-Xverify:all` as
# scripts/workloads.sh runs it), one after the other (interleaved, so a noisy machine hits every
# build alike). Each JVM writes its JSON summary; prints per run the classes seen and the hook's
# rewrite time per 10,000 classes seen, CPU and wall (the figures of the README's table), and the
# CPU time the hook took to read the classes' bytes in before its clocks started (`page_in` in
# agent/src/hook.rs; 0 for builds before it), then per workload and build the means over the
# rounds. Every run must have rc=0 and check=ok (exit status 1 otherwise; the kit's check of
# lucene_search fails on some machines without an agent too: its failures are printed and the
# times kept).
# Variables: ROUNDS (1), WL_KIT, WL_DIR as in scripts/compare_agents.sh.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 2 ]] || { echo "usage: $0 LIB[,LIB...] NAME..." >&2; exit 2; }
ROUNDS=${ROUNDS:-1}
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
read_libs "$1"
shift
warn_unless_tmpfs "$WL_DIR"
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
status=0
printf '%-14s %-5s %8s %12s %12s %12s\n' workload lib classes cpu_s/10k wall_s/10k page_in/10k
for _ in $(seq 1 "$ROUNDS"); do
  for name in "$@"; do
    for i in "${!libs[@]}"; do
      rm -f "$WL_DIR/$name"/lucce-summary-*.json
      line=$(LUCCE_JAVA_OPTS="-agentpath:${libs[$i]}=summary=off,json=lucce-summary-%p.json${lib_opts[$i]} -Xverify:all" \
        "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
      [[ $line == *"rc=0 "*"check=ok"* ]] || { echo "$name lib$((i + 1)): ${line:-no result}" >&2; status=1; }
      python3 - "$name" "lib$((i + 1))" "$WL_DIR/$name" <<'PY' | tee -a "$rows"
import glob, json, sys
name, lib, d = sys.argv[1:4]
seen = cpu = wall = page_in = 0
for f in glob.glob(d + "/lucce-summary-*.json"):
    s = json.load(open(f))
    seen += s["classes_seen"]; cpu += s["rewrite_cpu_ns_total"]; wall += s["rewrite_ns_total"]
    page_in += s.get("page_in_cpu_ns_total", 0)
per10k = lambda ns: ns / 1e9 / seen * 1e4 if seen else float("nan")
print(f"{name:<14} {lib:<5} {seen:8d} {per10k(cpu):12.4f} {per10k(wall):12.4f} {per10k(page_in):12.4f}")
PY
      rm -f "$WL_DIR/$name"/lucce-summary-*.json
    done
  done
done
echo
echo "mean over $ROUNDS round(s):"
awk '{k = $1 " " $2; n[k]++; c[k] += $4; w[k] += $5; p[k] += $6; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
     END { for (j = 1; j <= m; j++) { k = order[j]; printf "%-20s cpu %.4f  wall %.4f  page-in %.4f s per 10k classes\n", k, c[k] / n[k], w[k] / n[k], p[k] / n[k] } }' "$rows"
exit $status
