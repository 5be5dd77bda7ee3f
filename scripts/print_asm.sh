#!/usr/bin/env bash
# scripts/print_asm.sh METHOD [JAVA ARGS...]: the machine code C2 compiles for METHOD (HotSpot's
# CompileCommand pattern, e.g. 'lucce.Runtime::memo'), disassembled, while `java JAVA ARGS...`
# runs. Without arguments after METHOD it runs benches/java/CallBench's virtual loop under the
# repo's agent. For work on the probes' hit path, where one more live value costs C2 a spill at
# every call of every compiled method.
#
# Debian has no hsdis for JDK 17; its libhsdis0-fcml has the older entry point only
# (`decode_instructions`), so this builds a small shim that gives JDK 17 the one it looks for
# (`decode_instructions_virtual`). Installs libhsdis0-fcml with apt when missing (`apt-get
# update` first, as on a fresh machine; needs root).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
JDK=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
METHOD=${1:?usage: scripts/print_asm.sh METHOD [JAVA ARGS...]}
shift
FCML=/usr/lib/x86_64-linux-gnu/libhsdis.so.0
[[ -e $FCML ]] || { apt-get update -q >/dev/null && apt-get install -y -q libhsdis0-fcml >/dev/null; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/shim.c" <<EOF
#include <dlfcn.h>
#include <stdint.h>
typedef void *(*event_cb)(void *, const char *, void *);
typedef int (*printf_cb)(void *, const char *, ...);
typedef void *(*old_decode)(void *, void *, event_cb, void *, printf_cb, void *, const char *);
/* JDK 17's entry point; the code is decoded where it lies, so the buffer is the code itself. */
void *decode_instructions_virtual(uintptr_t start_va, uintptr_t end_va, unsigned char *buffer,
                                  uintptr_t length, event_cb e, void *es, printf_cb p, void *ps,
                                  const char *options, int newline) {
  static old_decode decode;
  if (!decode) {
    void *h = dlopen("$FCML", RTLD_NOW);
    if (!h || !(decode = (old_decode)dlsym(h, "decode_instructions"))) return 0;
  }
  return decode(buffer, buffer + length, e, es, p, ps, options);
}
EOF
gcc -shared -fPIC -O2 -o "$TMP/hsdis-amd64.so" "$TMP/shim.c" -ldl
if [[ $# -eq 0 ]]; then
  cargo build --release -q --manifest-path "$REPO/Cargo.toml" -p lucce-agent
  "$JDK/bin/javac" -d "$TMP/classes" "$REPO/benches/java/CallBench.java"
  set -- "-agentpath:$REPO/target/release/liblucce_agent.so=out=$TMP/store,summary=off" -cp "$TMP/classes" CallBench 10000000 o
fi
LD_LIBRARY_PATH=$TMP "$JDK/bin/java" -XX:+UnlockDiagnosticVMOptions "-XX:CompileCommand=print,$METHOD" "$@"
