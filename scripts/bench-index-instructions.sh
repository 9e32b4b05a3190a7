#!/usr/bin/env bash
# Instructions per index operation, counted by callgrind (deterministic; immune to a noisy machine).
# Usage: scripts/bench-index-instructions.sh [jar] [scenario...]
#   jar defaults to bench/target/benchmarks.jar; scenarios (IndexInstructionHarness) default to all.
# Prints per scenario the instructions per op of the measuring thread and its costliest JIT-compiled methods
# (addresses resolved through the JVM's perf map). Run it under the benchmark lock:
#   flock /tmp/kvrouter-bench.lock scripts/bench-index-instructions.sh
# Notes: -Xbatch compiles synchronously so the measured window runs compiled code only;
# --vex-iropt-register-updates=allregs-at-mem-access lets the JVM's SIGSEGV-based checks work under valgrind.
set -euo pipefail
jar="$(realpath "${1:-bench/target/benchmarks.jar}")"
shift || true
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(lookup naive ingest-map ingest-array decode-map decode-array)
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for s in "${scenarios[@]}"; do
  case "$s" in
    lookup) warm=30000; n=2000; per=1 ;;
    naive) warm=4000; n=300; per=1 ;;
    *) warm=30000; n=4096; per=32 ;;
  esac
  mkdir -p "$out/$s"
  (cd "$out/$s" && valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes --smc-check=all-non-file \
    --vex-iropt-register-updates=allregs-at-mem-access --callgrind-out-file="$out/$s/cg.%p" \
    java -Xbatch -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit -Xms2g -Xmx2g -XX:+UseParallelGC \
    -XX:ParallelGCThreads=1 -cp "$jar" \
    dev.kvrouter.bench.index.IndexInstructionHarness "$s" "$warm" "$n" >"$out/$s.log" 2>&1) || {
      echo "$s: valgrind failed"; grep -v '^==' "$out/$s.log" | tail -5; continue; }
  pid=$(ls "$out/$s" | sed -n 's/^cg\.\([0-9]*\)$/\1/p' | head -1)
  python3 - "$out/$s" "$pid" "$s" "$n" "$per" <<'PY'
import bisect, glob, os, re, sys
out, pid, scenario, n, per = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
# the thread that ran the measured loop: the one with the most instructions in the explicit dump
dumps = glob.glob(f"{out}/cg.{pid}.1-*")
def summary(f):
    for line in open(f):
        if line.startswith("summary:"):
            return int(line.split()[1])
    return 0
busiest = max(dumps, key=summary)
total = summary(busiest)
starts, ends, names = [], [], []
pm = f"/tmp/perf-{pid}.map"
if os.path.exists(pm):
    rows = []
    for line in open(pm):
        a, sz, name = line.rstrip("\n").split(" ", 2)
        rows.append((int(a, 16), int(sz, 16), name))
    rows.sort()
    starts = [r[0] for r in rows]; ends = [r[0] + r[1] for r in rows]; names = [r[2] for r in rows]
    os.remove(pm)
import subprocess
ann = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=99", busiest], capture_output=True, text=True).stdout
by = {}
for line in ann.splitlines():
    m = re.match(r"^\s*([\d,]+) \([^)]*\)\s+(?:\S*?:)?(.*?)(?: \[.*\])?$", line)
    if not m or "PROGRAM TOTALS" in line:
        continue
    c = int(m.group(1).replace(",", "")); f = m.group(2)
    am = re.match(r"^(0x[0-9a-f]+)", f)
    if am and starts:
        a = int(am.group(1), 16)
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and a < ends[i]:
            f = names[i]
    by[f] = by.get(f, 0) + c
unit = "op" if per == 1 else "block event"
print(f"{scenario}: {total / n:,.0f} instructions/op, {total / n / per:,.1f} per {unit} (thread {busiest.rsplit('-', 1)[1]}, {n} ops)")
for f, c in sorted(by.items(), key=lambda kv: -kv[1])[:10]:
    print(f"    {c / n / per:10,.1f}  {f[:150]}")
PY
done
