#!/usr/bin/env bash
# scripts/memory_breakdown.sh LIB NAME...: where the extra memory of full encoding goes, per
# workload of the kit. Each round runs NAME without an agent and then with agent LIB (full
# encoding, `out=`), both with the heap pinned (-Xms2g -Xmx2g -XX:+AlwaysPreTouch, so the Java
# heap is the same 2 GiB in both) and with the JVM's own accounting switched on at exit: Native
# Memory Tracking (committed bytes per category), metaspace statistics and compiler times
# (-XX:+CITime). A small malloc sampler, built here with gcc and preloaded, records the peak of
# the bytes malloc has handed out and not taken back (mallinfo2 every 20 ms), which covers the
# agent's own tables, sled, and the JVM's mallocs (compiler arenas among them).
#
# Per run it prints the peak RSS (/usr/bin/time), the malloc peak, NMT's metaspace ("Metaspace"
# committed), code cache ("Code"), "Internal" (the JVM's copies of class bytes kept for
# retransformation) and the C1 and C2 compile times; then the differences with minus without.
# The rest of the RSS difference is what the agent maps itself (its slots, memo tables, answer
# tables) and memory malloc keeps for reuse. The NMT figures are taken at exit, the peaks over
# the run.
#
# Variables: ROUNDS (1), WL_KIT, WL_DIR as in scripts/measure_runs.sh. Needs /usr/bin/time and gcc.
# The workloads must have been prepared (`prepare.sh WL_DIR`). Not for javac (its own -J-Xmx2g
# undoes the pinning) and best on a tmpfs WL_DIR, like the other whole-run scripts.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
[[ $# -ge 2 ]] || { echo "usage: $0 LIB NAME..." >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "$0: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
command -v gcc >/dev/null || { echo "$0: needs gcc (apt-get install gcc)" >&2; exit 2; }
lib=$(realpath -e "$1") || exit 2
shift
ROUNDS=${ROUNDS:-1}
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
warn_unless_tmpfs "$WL_DIR"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The sampler: one file per process (the kit's wrappers start more than one), the largest wins.
cat >"$work/mallocpeak.c" <<'EOF'
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static size_t peak;
static void sample(void) {
  struct mallinfo2 m = mallinfo2();
  size_t used = m.uordblks + m.hblkhd;
  if (used > peak) peak = used;
}
static void *loop(void *arg) {
  (void)arg;
  for (;;) { sample(); usleep(20000); }
  return NULL;
}
__attribute__((constructor)) static void start(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, loop, NULL) == 0) pthread_detach(t);
}
__attribute__((destructor)) static void report(void) {
  const char *dir = getenv("MALLOC_PEAK_DIR");
  char path[4096];
  sample();
  if (!dir) return;
  snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
  FILE *f = fopen(path, "w");
  if (f) { fprintf(f, "%zu\n", peak); fclose(f); }
}
EOF
gcc -O2 -shared -fPIC -o "$work/mallocpeak.so" "$work/mallocpeak.c" -lpthread || exit 2

jvm_opts="-Xms2g -Xmx2g -XX:+AlwaysPreTouch -XX:NativeMemoryTracking=summary -XX:+UnlockDiagnosticVMOptions"
jvm_opts+=" -XX:+PrintNMTStatistics -XX:+PrintMetaspaceStatisticsAtExit -XX:+CITime"

# NMT category $2's committed MB in log $1 (the last JVM's, at exit).
nmt() { grep -E "^-[[:space:]]+$2 \(" "$1" | tail -1 | sed -E 's/.*committed=([0-9]+).*/\1/' | awk '{printf "%.1f", $1/1048576}'; }
# "C1 Compile Time" / "C2 Compile Time" seconds in log $1.
ci() { grep -E "^[[:space:]]+$2 Compile Time:" "$1" | tail -1 | awk '{printf "%.2f", $4}'; }

# run NAME LABEL OPTS: one run; prints its line and keeps its figures in $work/NAME.LABEL.
run() {
  local name=$1 label=$2 opts=$3 peaks="$work/peaks.$2"
  rm -rf "$peaks" "$work/store" && mkdir -p "$peaks"
  LUCCE_JAVA_OPTS="$opts" MALLOC_PEAK_DIR=$peaks LD_PRELOAD=$work/mallocpeak.so \
    /usr/bin/time -o "$work/time" -f '%M' "$WL_KIT/run.sh" "$name" "$WL_DIR" >"$work/out" 2>&1
  local check log=$WL_DIR/logs/$name.log
  check=$(grep -o 'check=[^ ]*' "$work/out" | head -1)
  local rss malloc
  rss=$(awk '{printf "%.1f", $1/1024}' "$work/time" | tail -1)
  malloc=$(cat "$peaks"/* 2>/dev/null | sort -n | tail -1 | awk '{printf "%.1f", $1/1048576}')
  local meta code internal c1 c2
  meta=$(nmt "$log" Metaspace) code=$(nmt "$log" Code) internal=$(nmt "$log" Internal)
  c1=$(ci "$log" C1) c2=$(ci "$log" C2)
  echo "$rss ${malloc:-0} ${meta:-0} ${code:-0} ${internal:-0} ${c1:-0} ${c2:-0}" >"$work/$name.$label.$round"
  printf '%-14s %-6s %9s %9s %9s %7s %9s %6s %6s  %s\n' "$name" "$label" "$rss" "${malloc:--}" "${meta:--}" "${code:--}" "${internal:--}" "${c1:--}" "${c2:--}" "$check"
}

printf '%-14s %-6s %9s %9s %9s %7s %9s %6s %6s\n' workload agent rss_mb malloc_mb meta_mb code_mb intern_mb c1_s c2_s
for round in $(seq 1 "$ROUNDS"); do
  for name in "$@"; do
    run "$name" none "$jvm_opts"
    run "$name" agent "-agentpath:$lib=out=$work/store/%p,summary=off $jvm_opts"
  done
done
echo
echo "mean difference (agent - none), MB and s:"
printf '%-14s %9s %9s %9s %7s %9s %6s %6s\n' workload rss malloc meta code internal c1 c2
# mean NAME LABEL: the seven figures of NAME's LABEL runs, averaged over the rounds.
mean() { cat "$work/$1.$2".* | awk '{for (i=1;i<=NF;i++) s[i]+=$i; n++} END {for (i=1;i<=7;i++) printf "%s ", s[i]/n; print ""}'; }
for name in "$@"; do
  paste -d' ' <(mean "$name" agent) <(mean "$name" none) | awk -v n="$name" '{printf "%-14s %+9.1f %+9.1f %+9.1f %+7.1f %+9.1f %+6.2f %+6.2f\n", n, $1-$8, $2-$9, $3-$10, $4-$11, $5-$12, $6-$13, $7-$14}'
done
