#!/usr/bin/env bash
# scripts/steady_state.sh [LIB...]: the kit's antlr4 workload repeated in one JVM
# (benches/java/AntlrSteady.java), without an agent and with each agent LIB in full encoding
# (default: this repo's target/release/liblucce_agent.so, built here), interleaved ROUNDS times.
# Prints per run the first iteration's and the mean of the last half's milliseconds, then per
# agent the ratio of those means to the runs without: the steady state, apart from start-up,
# class loading and compilation, which the kit's whole runs include.
# Variables: ITERATIONS (20), ROUNDS (2), WL_DIR (the prepared kit, as for run.sh),
# ANTLR_JAR (/usr/share/java/antlr4-runtime.jar).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
JDK=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
WL_DIR=${WL_DIR:-$HOME/.cache/lucce-workloads}
ITERATIONS=${ITERATIONS:-20}
ROUNDS=${ROUNDS:-2}
ANTLR_JAR=${ANTLR_JAR:-/usr/share/java/antlr4-runtime.jar}
KIT=$WL_DIR/antlr4
[[ -f $KIT/input.txt && -d $KIT/cls ]] || { echo "$0: no prepared antlr4 workload in $WL_DIR (../shared/workloads/prepare.sh DIR)" >&2; exit 2; }
[[ -f $ANTLR_JAR ]] || { echo "$0: $ANTLR_JAR missing (Debian package libantlr4-runtime-java)" >&2; exit 2; }
libs=("$@")
if [[ ${#libs[@]} -eq 0 ]]; then
  cargo build --release -q --manifest-path "$REPO/Cargo.toml" -p lucce-agent
  libs=("$REPO/target/release/liblucce_agent.so")
fi
for i in "${!libs[@]}"; do libs[i]=$(realpath -e "${libs[i]}"); done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
CP=$ANTLR_JAR:$KIT/cls
"$JDK/bin/javac" -nowarn -cp "$CP" -d "$TMP/classes" "$REPO/benches/java/AntlrSteady.java"
# One run: prints "FIRST MEAN_OF_LAST_HALF" in milliseconds.
run() {
  local agent=() out
  [[ -n $1 ]] && agent=("-agentpath:$1=out=$TMP/store,summary=off")
  rm -rf "$TMP/store"
  out=$("$JDK/bin/java" "${agent[@]}" -cp "$CP:$TMP/classes" AntlrSteady "$KIT/input.txt" "$ITERATIONS")
  awk -v n="$ITERATIONS" '$1 == "iteration" { t[$2] = $4 }
    END { s = 0; for (i = int(n / 2); i < n; i++) s += t[i]; printf "%.1f %.1f\n", t[0], s / (n - int(n / 2)) }' <<<"$out"
}
declare -A sum
names=(none)
for i in "${!libs[@]}"; do names+=("lib$((i + 1))"); echo "lib$((i + 1)) = ${libs[i]}"; done
printf '%-6s %-6s %12s %22s\n' round agent first_ms steady_ms
for r in $(seq 1 "$ROUNDS"); do
  for k in "${!names[@]}"; do
    lib=""
    [[ $k -gt 0 ]] && lib=${libs[k - 1]}
    read -r first steady < <(run "$lib") || true
    [[ -n ${steady:-} ]] || { echo "$0: the run with ${names[k]} failed" >&2; exit 1; }
    printf '%-6s %-6s %12s %22s\n' "$r" "${names[k]}" "$first" "$steady"
    sum[${names[k]}]=$(awk -v a="${sum[${names[k]}]:-0}" -v b="$steady" 'BEGIN { print a + b }')
  done
done
for name in "${names[@]:1}"; do
  awk -v n="$name" -v a="${sum[$name]}" -v b="${sum[none]}" 'BEGIN { printf "%s: steady state %.2fx the run without an agent\n", n, a / b }'
done
