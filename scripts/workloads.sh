#!/usr/bin/env bash
# scripts/workloads.sh: the agent on the real-program workload kit (../shared/workloads).
#
#   scripts/workloads.sh [NAME...]        (default: all 11 workloads)
#
# 1. builds the agent (release), runs the kit's install.sh (apt; needs root) and prepare.sh,
# 2. runs ROUNDS interleaved rounds: each round runs the workloads without the agent, then with
#    `-agentpath:LIB=AGENT_OPTS $AGENT_JVM_OPTS` (default -Xverify:all: every class verified, the
#    JDK's too),
# 3. prints per workload: check results, classes/methods rewritten and skipped, rewrite time
#    (wall and the hook thread's CPU time), median wall time with and without the agent and their
#    ratio, and the geometric mean of the ratios,
# 4. with WRITE_DOC=1, replaces the report table in docs/agent.md.
#
# Variables: ROUNDS (3), WL_KIT (../shared/workloads next to the repo, else /work/shared/workloads),
# WL_DIR (~/.cache/lucce-workloads), AGENT_LIB (default: built here), AGENT_OPTS (extra agent
# options; `out=DIR/%p` for full encoding), AGENT_JVM_OPTS (-Xverify:all; empty to time the agent
# alone), OUT (a results directory; default a fresh temp dir), WRITE_DOC (0), REPORT_ONLY (1:
# only redo the report from OUT/runs.txt and OUT/json of an earlier run).
# Exit status: 0 only if every run of every workload had rc=0 and check=ok.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
ROUNDS=${ROUNDS:-3}
AGENT_OPTS=${AGENT_OPTS:-}
AGENT_JVM_OPTS=${AGENT_JVM_OPTS--Xverify:all}
REPORT_ONLY=${REPORT_ONLY:-0}
# shellcheck source=kit.sh
. "$REPO/scripts/kit.sh"
OUT=${OUT:-$(mktemp -d /tmp/lucce-workloads.XXXXXX)}
mkdir -p "$OUT"
warn_unless_tmpfs "$WL_DIR"
NAMES=("$@")
[[ ${#NAMES[@]} -eq 0 ]] && mapfile -t NAMES < <("$WL_KIT/run.sh" list)

if [[ $REPORT_ONLY == 1 ]]; then
  ROUNDS=0
elif [[ -z ${AGENT_LIB:-} ]]; then
  (cd "$REPO" && cargo build --release -p lucce-agent --lib) || exit 2
  TD=${CARGO_TARGET_DIR:-$REPO/target}
  AGENT_LIB=$(cd "$TD/release" && pwd -P)/liblucce_agent.so
fi
if [[ $REPORT_ONLY != 1 ]]; then
  [[ -f $AGENT_LIB ]] || { echo "no agent library at $AGENT_LIB" >&2; exit 2; }
  echo "agent: $AGENT_LIB; kit: $WL_KIT; dir: $WL_DIR; results: $OUT; rounds: $ROUNDS"
  "$WL_KIT/install.sh" >"$OUT/install.log" 2>&1 || { echo "install.sh failed, see $OUT/install.log" >&2; exit 2; }
  "$WL_KIT/prepare.sh" "$WL_DIR" >"$OUT/prepare.log" 2>&1 || { echo "prepare.sh failed, see $OUT/prepare.log" >&2; exit 2; }
  rm -f "$OUT/runs.txt"
fi

# One JSON summary per JVM, written into the workload's own folder (relative path, %p = pid).
OPTS="summary=off,json=lucce-summary-%p.json${AGENT_OPTS:+,$AGENT_OPTS}"
status=0
for ((r = 1; r <= ROUNDS; r++)); do
  for mode in base agent; do
    for n in "${NAMES[@]}"; do
      rm -f "$WL_DIR/$n"/lucce-summary-*.json
      if [[ $mode == agent ]]; then
        line=$(LUCCE_JAVA_OPTS="-agentpath:$AGENT_LIB=$OPTS $AGENT_JVM_OPTS" "$WL_KIT/run.sh" "$n" "$WL_DIR" 2>&1 | tail -1)
        mkdir -p "$OUT/json/$r/$n"
        mv "$WL_DIR/$n"/lucce-summary-*.json "$OUT/json/$r/$n/" 2>/dev/null
        cp "$WL_DIR/logs/$n.log" "$OUT/json/$r/$n/program.log" 2>/dev/null
      else
        line=$("$WL_KIT/run.sh" "$n" "$WL_DIR" 2>&1 | tail -1)
      fi
      echo "round=$r mode=$mode $line" | tee -a "$OUT/runs.txt"
    done
  done
done
grep -qv 'rc=0 .*check=ok' "$OUT/runs.txt" && status=1

python3 - "$OUT" "$REPO/docs/agent.md" "${WRITE_DOC:-0}" "$AGENT_OPTS" <<'PY'
import json, math, os, re, statistics, sys
out, doc, write_doc, extra = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
runs = {}
for line in open(os.path.join(out, "runs.txt")):
    f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    name = line.split()[2]
    runs.setdefault(name, {"base": [], "agent": [], "checks": []})
    runs[name][f["mode"]].append(float(f["wall_s"]))
    runs[name]["checks"].append(f"{f['mode']}:{f['check'] if f['rc'] == '0' else 'rc=' + f['rc']}")
rows = []
tot = {"base": 0.0, "agent": 0.0}
for name, r in runs.items():
    agg = {"classes_seen": 0, "classes_rewritten": 0, "classes_failed": 0, "methods_with_code": 0,
           "methods_rewritten": 0, "methods_skipped": 0, "rewrite_ns_total": 0, "rewrite_cpu_ns_total": 0, "jvms": 0,
           "retransform_failed": 0}
    reasons = {}
    jdir = os.path.join(out, "json", "1", name)   # counts from round 1 (identical every round)
    for fn in sorted(os.listdir(jdir)) if os.path.isdir(jdir) else []:
        if not fn.endswith(".json"):
            continue
        s = json.load(open(os.path.join(jdir, fn)))
        agg["jvms"] += 1
        for k in agg:
            if k in s:
                agg[k] += s[k]
        agg["retransform_failed"] += s["retransform"]["failed"]
        for k, v in s["skipped_by_reason"].items():
            reasons[k] = reasons.get(k, 0) + v
    checks = sorted(set(r["checks"]))
    ok = all(c.endswith(":ok") for c in checks)
    mb, ma = statistics.median(r["base"]), statistics.median(r["agent"]) if r["agent"] else float("nan")
    tot["base"] += mb; tot["agent"] += ma
    pct = 100.0 * agg["methods_rewritten"] / agg["methods_with_code"] if agg["methods_with_code"] else 0.0
    per10k = lambda ns: ns / 1e9 / agg["classes_seen"] * 1e4 if agg["classes_seen"] else 0.0
    rows.append((name, "ok" if ok else "FAIL " + ",".join(c for c in checks if not c.endswith(":ok")),
                 agg["classes_rewritten"], agg["classes_seen"], agg["classes_failed"] + agg["retransform_failed"],
                 agg["methods_rewritten"], agg["methods_with_code"], pct,
                 ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "-",
                 agg["rewrite_ns_total"] / 1e6, per10k(agg["rewrite_ns_total"]), per10k(agg["rewrite_cpu_ns_total"]),
                 mb, ma, ma / mb, agg["jvms"]))
hdr = ("| workload | check (all runs) | classes rewritten / seen | failed | methods rewritten / with code | % | skipped (reasons) "
       "| rewrite ms | s per 10k classes (wall / CPU) | wall s without | wall s with | ratio |")
lines = [hdr, "|" + "---|" * 12]
for (n, ck, cr, cs, cf, mr, mc, pct, sk, ms, p10, c10, mb, ma, ratio, jv) in rows:
    lines.append(f"| {n} | {ck} | {cr} / {cs} | {cf} | {mr} / {mc} | {pct:.3f} | {sk} | {ms:.0f} | {p10:.3f} / {c10:.3f} | {mb:.2f} | {ma:.2f} | {ratio:.2f} |")
ratios = [r[-2] for r in rows if r[-2] > 0 and not math.isnan(r[-2])]
geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
lines.append(f"| **all** (sum; geometric mean of the ratios) | | | | | | | | | **{tot['base']:.1f}** | **{tot['agent']:.1f}** | **{geo:.2f}** |")
table = "\n".join(lines)
print(table)
print(f"\n(wall times: median of {len(next(iter(runs.values()))['base'])} interleaved runs; results in {out})")
if write_doc:
    text = open(doc).read()
    begin, end = "<!-- report:begin -->", "<!-- report:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < 0:
        sys.exit(f"{doc}: report markers missing")
    note = (f"\nMeasured by `scripts/workloads.sh` ({len(next(iter(runs.values()))['base'])} interleaved rounds"
            + (f", AGENT_OPTS={extra}" if extra else "") + "):\n\n")
    open(doc, "w").write(text[:i + len(begin)] + note + table + "\n" + text[j:])
    print(f"wrote the table into {doc}")
PY
exit $status
