#!/usr/bin/env bash
# scripts/compare_agents.sh OLD_LIB NEW_LIB NAME...: two agent builds side by side on the workload
# kit, full encoding (every class, no sampling). Per workload, one after another: the kit without
# an agent, with OLD_LIB, with NEW_LIB; prints the wall times, both ratios and their geometric
# means. Every run must have rc=0 and check=ok (exit status 1 otherwise).
# Variables: WL_KIT (../shared/workloads next to the repo, else /work/shared/workloads), WL_DIR (a
# prepared kit dir, ~/.cache/lucce-workloads; `scripts/workloads.sh` prepares one).
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 3 ]] || { echo "usage: $0 OLD_LIB NEW_LIB NAME..." >&2; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
shift 2
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
stores=$(mktemp -d)
rows=$stores.rows
: >"$rows"
trap 'rm -rf "$stores" "$rows"' EXIT
status=0
printf '%-14s %9s %9s %9s %9s %9s\n' workload without old new ratio_old ratio_new
for name in "$@"; do
  walls=()
  for lib in "" "$old" "$new"; do
    opts=""
    [[ -n $lib ]] && opts="-agentpath:$lib=out=$stores/%p,summary=off"
    line=$(LUCCE_JAVA_OPTS="$opts" "$WL_KIT/run.sh" "$name" "$WL_DIR" 2>/dev/null | grep ' rc=' | tail -1)
    [[ $line == *"rc=0 "*"check=ok"* ]] || { echo "$name ${lib:-without}: ${line:-no result}" >&2; status=1; }
    walls+=("$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' <<<"$line")")
    rm -rf "${stores:?}"/*
  done
  awk -v n="$name" -v a="${walls[0]:-0}" -v b="${walls[1]:-0}" -v c="${walls[2]:-0}" \
    'BEGIN { if (a > 0) printf "%-14s %9.2f %9.2f %9.2f %9.2f %9.2f\n", n, a, b, c, b / a, c / a }' | tee -a "$rows"
done
awk '{ lo += log($5); ln += log($6); k++ }
  END { if (k) printf "geometric mean of the ratios: old %.2f, new %.2f\n", exp(lo / k), exp(ln / k) }' "$rows"
exit $status
