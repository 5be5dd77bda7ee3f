#!/usr/bin/env bash
# scripts/memory_breakdown.sh LIB NAME...: where the extra memory of full encoding goes, per
# workload of the kit. Each round runs NAME without an agent and then with agent LIB (full
# encoding, `out=`), both with the heap pinned (-Xms2g -Xmx2g -XX:+AlwaysPreTouch, so the Java
# heap is the same 2 GiB in both) and with the JVM's own accounting switched on at exit: Native
# Memory Tracking (committed bytes per category), metaspace statistics and compiler times
# (-XX:+CITime). A small malloc sampler, built here with gcc and preloaded, records the peak of
# the bytes malloc has handed out and not taken back (mallinfo2 every 20 ms), which covers the
# agent's own tables, sled, and the JVM's mallocs (compiler arenas among them); it also reads the
# RSS at each sample.
#
# Per run it prints the peak RSS (/usr/bin/time), where in the JVM's run the peak fell (percent
# of its lifetime) and the RSS at the middle of the run (where the kit's programs have reached a
# plateau: a peak near 100% comes from the program's last phase), the
# malloc peak (which counts blocks malloc handed out that were never touched, such as sled's
# statistics, and so exceeds the RSS it causes), NMT's metaspace ("Metaspace"
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
#include <string.h>
#include <unistd.h>
static size_t peak;
/* VmRSS in kB at every sample: where in the run the peak falls, and what the middle holds. */
enum { MAX_SAMPLES = 1 << 17 };
static long rss[MAX_SAMPLES];
static size_t samples;
static long rss_kb(void) {
  char buf[4096];
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strstr(buf, "VmRSS:");
  return p ? atol(p + 6) : 0;
}
static void sample(void) {
  struct mallinfo2 m = mallinfo2();
  size_t used = m.uordblks + m.hblkhd;
  if (used > peak) peak = used;
  if (samples < MAX_SAMPLES) rss[samples++] = rss_kb();
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
/* One line: the malloc peak (bytes), the RSS peak and the RSS at the middle of the run (kB), and
   where the peak fell (percent of the run). */
__attribute__((destructor)) static void report(void) {
  const char *dir = getenv("MALLOC_PEAK_DIR");
  char path[4096];
  sample();
  if (!dir) return;
  size_t top = 0;
  for (size_t i = 1; i < samples; i++) if (rss[i] > rss[top]) top = i;
  snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
  FILE *f = fopen(path, "w");
  if (f) { fprintf(f, "%zu %ld %ld %zu\n", peak, rss[top], rss[samples / 2], 100 * top / samples); fclose(f); }
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
  local rss malloc mid at
  rss=$(awk '{printf "%.1f", $1/1024}' "$work/time" | tail -1)
  # The sampler's line of the process with the highest RSS (the JVM, not the kit's wrappers).
  read -r malloc mid at < <(cat "$peaks"/* 2>/dev/null | sort -n -k2 | tail -1 |
    awk '{printf "%.1f %.1f %d", $1/1048576, $3/1024, $4}')
  local meta code internal c1 c2
  meta=$(nmt "$log" Metaspace) code=$(nmt "$log" Code) internal=$(nmt "$log" Internal)
  c1=$(ci "$log" C1) c2=$(ci "$log" C2)
  echo "$rss ${mid:-0} ${malloc:-0} ${meta:-0} ${code:-0} ${internal:-0} ${c1:-0} ${c2:-0}" >"$work/$name.$label.$round"
  printf '%-14s %-6s %9s %7s %8s %9s %9s %7s %9s %6s %6s  %s\n' "$name" "$label" "$rss" "${at:--}%" "${mid:--}" "${malloc:--}" "${meta:--}" "${code:--}" "${internal:--}" "${c1:--}" "${c2:--}" "$check"
}

printf '%-14s %-6s %9s %7s %8s %9s %9s %7s %9s %6s %6s\n' workload agent rss_mb peak_at mid_mb malloc_mb meta_mb code_mb intern_mb c1_s c2_s
for round in $(seq 1 "$ROUNDS"); do
  for name in "$@"; do
    run "$name" none "$jvm_opts"
    run "$name" agent "-agentpath:$lib=out=$work/store/%p,summary=off $jvm_opts"
  done
done
echo
echo "mean difference (agent - none), MB and s:"
printf '%-14s %9s %8s %9s %9s %7s %9s %6s %6s\n' workload rss mid malloc meta code internal c1 c2
# mean NAME LABEL: the eight figures of NAME's LABEL runs, averaged over the rounds.
mean() { cat "$work/$1.$2".* | awk '{for (i=1;i<=NF;i++) s[i]+=$i; n++} END {for (i=1;i<=8;i++) printf "%s ", s[i]/n; print ""}'; }
for name in "$@"; do
  paste -d' ' <(mean "$name" agent) <(mean "$name" none) |
    awk -v n="$name" '{printf "%-14s %+9.1f %+8.1f %+9.1f %+9.1f %+7.1f %+9.1f %+6.2f %+6.2f\n", n, $1-$9, $2-$10, $3-$11, $4-$12, $5-$13, $6-$14, $7-$15, $8-$16}'
done
