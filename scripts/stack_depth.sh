#!/usr/bin/env bash
# scripts/stack_depth.sh [ROUNDS]: how many frames of a recursive method a 1 MiB thread stack
# holds without the agent, with the counting agent and in record mode, interpreted (-Xint) and
# with the JIT (benches/java/StackDepth.java; AGENT_LIB: another agent library). One line per
# run: mode, JVM, the depths of f(int) and g(Object, int) at StackOverflowError.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
JDK=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
LIB=${AGENT_LIB:-$REPO/target/release/liblucce_agent.so}
[[ -n ${AGENT_LIB:-} ]] || cargo build --release -q --manifest-path "$REPO/Cargo.toml" -p lucce-agent
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$JDK/bin/javac" -d "$TMP/classes" "$REPO/benches/java/StackDepth.java"
for _ in $(seq 1 "${1:-1}"); do
  for jit in -Xint -Xmixed; do
    for mode in none counting record; do
      case $mode in
        none) agent=() ;;
        counting) agent=("-agentpath:$LIB=summary=off") ;;
        record) rm -rf "$TMP/store"; agent=("-agentpath:$LIB=out=$TMP/store,summary=off") ;;
      esac
      depths=$("$JDK/bin/java" "$jit" "${agent[@]}" -cp "$TMP/classes" StackDepth | awk '{printf "%s %s  ", $1, $2}')
      printf '%-9s %-8s %s\n' "$mode" "$jit" "$depths"
    done
  done
done
