#!/usr/bin/env bash
# scripts/bench_context.sh [ROUNDS]: Lucce.context() and Lucce.mark() against
# new Throwable().getStackTrace() and StackWalker at depths 10, 100 and 1000, on a JVM recording
# with the agent (builds both first; AGENT_LIB: another agent library, to compare builds). Prints
# ns per call (best of ROUNDS interleaved rounds).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
JDK=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
cargo build --release -q --manifest-path "$REPO/Cargo.toml" -p lucce-agent -p lucce
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$JDK/bin/javac" -d "$TMP/stub" "$REPO/examples/java/stub/lucce/Lucce.java"
"$JDK/bin/javac" -cp "$TMP/stub" -d "$TMP/classes" "$REPO/benches/java/ContextBench.java"
"$JDK/bin/java" -agentpath:"${AGENT_LIB:-$REPO/target/release/liblucce_agent.so}=out=$TMP/store,summary=off" -cp "$TMP/classes" ContextBench "${1:-5}"
