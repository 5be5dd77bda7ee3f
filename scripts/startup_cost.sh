#!/usr/bin/env bash
# scripts/startup_cost.sh [ROUNDS]: what the agent costs one JVM start, the part a program pays
# however short it is: benches/java/Startup.java (prints one line) without the agent, with the
# counting agent, in record mode, and in record mode with a class cache an untimed first run
# filled (as `lucce record` runs it), interleaved. One line per run: wall, user and system CPU
# seconds and peak RSS (/usr/bin/time), and the VMInit batch's time from the agent's summary
# (the JDK classes loaded before the agent could rewrite them, retransformed: docs/agent.md).
# Then the means per mode. AGENT_LIB: another agent library. Needs /usr/bin/time.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
JDK=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
LIB=${AGENT_LIB:-$REPO/target/release/liblucce_agent.so}
ROUNDS=${1:-5}
[[ -x /usr/bin/time ]] || { echo "$0: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
[[ -n ${AGENT_LIB:-} ]] || cargo build --release -q --manifest-path "$REPO/Cargo.toml" -p lucce-agent
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$JDK/bin/javac" -d "$TMP/classes" "$REPO/benches/java/Startup.java"
modes=(none counting record record+cache)
run() { # MODE: one run, one line
  local agent=() batch=-
  case $1 in
    none) ;;
    counting) agent=("-agentpath:$LIB=summary=$TMP/summary") ;;
    record) rm -rf "$TMP/store"; agent=("-agentpath:$LIB=out=$TMP/store,summary=$TMP/summary") ;;
    record+cache) rm -rf "$TMP/store"; agent=("-agentpath:$LIB=out=$TMP/store,cache=$TMP/cache,summary=$TMP/summary") ;;
  esac
  rm -f "$TMP/summary"
  /usr/bin/time -o "$TMP/time" -f '%e %U %S %M' "$JDK/bin/java" "${agent[@]}" -cp "$TMP/classes" Startup >"$TMP/out" 2>&1 \
    || { echo "$0: $1 run failed:" >&2; cat "$TMP/out" >&2; exit 1; }
  grep -qx started "$TMP/out" || { echo "$0: $1 run printed something else:" >&2; cat "$TMP/out" >&2; exit 1; }
  [[ -f $TMP/summary ]] && batch=$(sed -n 's/.* in one batch .* in \([0-9.]*\) ms;.*/\1/p' "$TMP/summary")
  batch=${batch:--}
  read -r wall user sys rss <"$TMP/time"
  printf '%-13s wall %5.2f s  user %5.2f s  sys %5.2f s  peak RSS %6.1f MiB  batch %s ms\n' "$1" "$wall" "$user" "$sys" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$batch"
}
run record+cache >/dev/null # fills the cache
for _ in $(seq 1 "$ROUNDS"); do
  for m in "${modes[@]}"; do run "$m"; done
done | tee "$TMP/runs"
echo "means over $ROUNDS rounds:"
for m in "${modes[@]}"; do
  awk -v m="$m" '$1 == m { n++; w += $3; u += $6; s += $9; r += $13; if ($16 != "-") { nb++; b += $16 } }
    END { printf "%-13s wall %5.3f s  CPU %5.3f s  peak RSS %6.1f MiB  batch %s\n", m, w/n, (u+s)/n, r/n, (nb ? sprintf("%.1f ms", b/nb) : "-") }' "$TMP/runs"
done
