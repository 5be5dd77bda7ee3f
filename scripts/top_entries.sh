#!/usr/bin/env bash
# scripts/top_entries.sh STORE [N]: where a program's method entries go. A recording with
# `sample=K` makes every Kth method entry of each thread a `sample` event, so the methods at the
# top of its samples are the ones entered most: prints the N (default 20) most frequent top
# frames with their share of the samples. For example on the stores of
# `WL_DIR=/dev/shm/wl scripts/record_workloads.sh ant` (sample=1000): `scripts/top_entries.sh
# OUT/stores/ant/*/`. Variable: LUCCE, the CLI (default target/release/lucce).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 1 ]] || { echo "usage: $0 STORE [N]" >&2; exit 2; }
LUCCE=${LUCCE:-$REPO/target/release/lucce}
"$LUCCE" events --json "$1" 2>/dev/null | python3 -c '
import collections, json, sys
top, n = collections.Counter(), 0
for line in sys.stdin:
    e = json.loads(line)
    if e.get("kind") == "sample" and e["frames"]:
        f = e["frames"][0]
        top[f["class"] + "." + f["method"]] += 1
        n += 1
print(f"{n} samples")
for method, k in top.most_common(int(sys.argv[1])):
    print(f"{100 * k / n:6.2f}%  {method}")
' "${2:-20}"
