#!/usr/bin/env bash
# scripts/bench_calls.sh [ITERATIONS]: steady-state cost of full encoding per call
# (benches/java/CallBench.java): ns per loop iteration, best of 5 rounds, without the agent and
# with it (record mode, no sampling), for the virtual-call loop, the recursion loop and the boxing
# method-reference loop (its lambda proxy, a hidden class, calls Long.valueOf and then the target),
# and how many entries took the agent's locked path ("slow entries" in the agent's log) and how
# many walked, over all rounds.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
JDK=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
N=${1:-10000000}
cargo build --release -q --manifest-path "$REPO/Cargo.toml" -p lucce-agent
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$JDK/bin/javac" -d "$TMP/classes" "$REPO/benches/java/CallBench.java"
printf '%-10s %12s %12s %8s %14s %10s\n' loop 'no agent' 'agent' ratio 'locked entries' walks
for mode in o r b; do
  n=$N name=virtual
  [[ $mode == r ]] && name=recursion
  [[ $mode == b ]] && name=boxing
  base=$("$JDK/bin/java" -cp "$TMP/classes" CallBench "$n" "$mode")
  rm -rf "$TMP/store"
  with=$("$JDK/bin/java" -agentpath:"$REPO/target/release/liblucce_agent.so=out=$TMP/store,summary=off,loglevel=info,log=$TMP/log-$mode" -cp "$TMP/classes" CallBench "$n" "$mode")
  locked=$(sed -n 's/.* \([0-9]*\) slow entries.*/\1/p' "$TMP/log-$mode")
  walks=$(sed -n 's/.*, \([0-9]*\) walks, .*/\1/p' "$TMP/log-$mode")
  printf '%-10s %12s %12s %8s %14s %10s\n' "$name" "$base" "$with" "$(awk -v a="$with" -v b="$base" 'BEGIN { printf "%.0fx", a / b }')" "$locked" "$walks"
done
