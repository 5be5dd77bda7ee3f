#!/usr/bin/env bash
# scripts/probe_budget.sh LIB NAME...: what the 1.25× whole-run target leaves per probe, against
# what the probes cost. Each round runs every workload of the kit three times in a row: without
# an agent, with agent LIB counting (its JSON summary gives how many method entries and call
# probes ran) and with LIB in full encoding. Per workload it prints the wall seconds of the
# three (the kit's own figure), the counts, a quarter of the run without the agent divided by
# the probes (entries + call probes: the time per probe that 1.25× allows) and full encoding's
# extra time divided by the same (what a probe costs now); with ROUNDS > 1, means over rounds.
# Every run must have rc=0 and check=ok (exit status 1 otherwise).
# Needs /usr/bin/time and python3. Variables: ROUNDS (1), PIN_HEAP (2g; the Java heap of every
# run, touched at start, as in scripts/measure_runs.sh), WL_KIT and WL_DIR as there.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 2 ]] || { echo "usage: $0 LIB NAME..." >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "$0: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
lib=$(realpath -e "$1") || exit 2
shift
ROUNDS=${ROUNDS:-1}
PIN_HEAP=${PIN_HEAP:-2g}
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
warn_unless_tmpfs "$WL_DIR"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for _ in $(seq 1 "$ROUNDS"); do
  for name in "$@"; do
    for mode in none counting full; do
      opts="-Xms$PIN_HEAP -Xmx$PIN_HEAP -XX:+AlwaysPreTouch"
      case $mode in
        counting) opts+=" -agentpath:$lib=summary=off,json=$work/count-%p.json" ;;
        full) opts+=" -agentpath:$lib=out=$work/store/%p,summary=off" ;;
      esac
      line=$(LUCCE_JAVA_OPTS="$opts" "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
      [[ $line == *"rc=0 "*"check=ok"* ]] || { echo "$name $mode: ${line:-no result}" >&2; status=1; }
      echo "$name $mode $(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' <<<"$line")" >>"$work/walls"
    done
    # The counting runs' summaries (one per JVM of the run), summed.
    python3 - "$name" "$work"/count-*.json >>"$work/counts" <<'EOF'
import json, sys
entries = calls = 0
for path in sys.argv[2:]:
    d = json.load(open(path))
    entries += d["entries"]
    calls += d["calls"]
print(sys.argv[1], entries, calls)
EOF
    rm -rf "$work"/count-*.json "${work:?}/store"
  done
done
python3 - "$work/walls" "$work/counts" <<'EOF'
import collections, math, sys
walls = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, mode, *wall = line.split()
    if wall:
        walls[name, mode].append(float(wall[0]))
counts = collections.defaultdict(list)
for line in open(sys.argv[2]):
    name, entries, calls = line.split()
    counts[name].append((int(entries), int(calls)))
mean = lambda xs: sum(xs) / len(xs)
print(f"{'workload':14} {'none_s':>7} {'count_s':>7} {'full_s':>7} {'entries':>8} {'calls':>8} {'1.25x_ns/probe':>14} {'full_ns/probe':>13}")
logs = collections.defaultdict(list)
for name in counts:
    w = {m: walls.get((name, m)) for m in ("none", "counting", "full")}
    if not all(w.values()):
        continue
    none, count, full = (mean(w[m]) for m in ("none", "counting", "full"))
    entries = mean([e for e, _ in counts[name]])
    calls = mean([c for _, c in counts[name]])
    probes = entries + calls
    if probes == 0 or none == 0:
        continue
    print(f"{name:14} {none:7.2f} {count:7.2f} {full:7.2f} {entries / 1e9:7.2f}G {calls / 1e9:7.2f}G "
          f"{0.25 * none / probes * 1e9:14.3f} {(full - none) / probes * 1e9:13.2f}")
    logs["counting"].append(math.log(count / none))
    logs["full"].append(math.log(full / none))
for mode, xs in logs.items():
    print(f"geometric mean of the wall ratios, {mode}: {math.exp(mean(xs)):.2f}x over {len(xs)}")
EOF
exit $status
