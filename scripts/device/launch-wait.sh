#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool): where a launch-and-wait round trip's time goes, for
# issue 42's launch-bound PolyBench-ACC programs (lu, jacobi-1D: a wait after every launch),
# which are 1.07-1.11x nvcc's build on an H100 while the runtime's host work per round trip
# is 0.4-1 us and its driver calls are nvcc's (a launch and a stream synchronization).
# Carry carry/bin/launch_probe and carry/bin/waits2d_cu (scripts/device/prepare builds both;
# pack them alone: `tar cJf carry/lw.txz -C carry bin/launch_probe bin/waits2d_cu`, carry
# ["carry/lw.txz", "scripts/device/launch-wait.sh"] and start with `tar xJf carry/lw.txz -C carry`).
#   bash scripts/device/launch-wait.sh [ROUNDS]      (default 5)
# 1. the bare driver's round trip by how it waits (synchronize, or poll a query) and by the
#    context's scheduling flag (auto, spin, yield, blocking): can a runtime's own wait return
#    sooner than the driver's?
# 2. bench/cuda/waits2d.cu (lu's loop) at N = 1024, 2048 and 4096, nvcc's build and ours,
#    ROUNDS interleaved rounds: does the gap grow with N, as PolyBench's lu suggested?
# 3. ncu's durations of 20 kernels of each build at N = 2048 (launches serialized: the kernels'
#    own time, not the gaps).
# Writes $OUT/launch-wait.jsonl, $OUT/probe.txt and $OUT/ncu.txt; prints the medians.
set -u
out=${OUT:-/tmp/out}
rounds=${1:-5}
mkdir -p "$out" /tmp/lw
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || { echo "no nvcc" >&2; exit 1; }
"$nvcc" -O3 -arch=sm_90 bench/cuda/waits2d.cu -o /tmp/lw/waits2d || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/device.txt" 2>&1
for sched in "" spin yield blocking; do
  echo "== context scheduling: ${sched:-auto}"
  LAUNCH_PROBE_SCHED=$sched timeout 120 carry/bin/launch_probe 20000 2>&1 | grep "wait"
done >"$out/probe.txt" 2>&1
export HPVM_MGPU_DEVICES=cuda:1
field() { awk -v k="$1" '$1 == k { print $2 }'; }
# One unrecorded run of each first: nothing is measured on a fresh GPU.
/tmp/lw/waits2d 1024 1 >/dev/null
carry/bin/waits2d_cu 1024 1 >/dev/null
for r in $(seq "$rounds"); do
  for n in 1024 2048 4096; do
    a=$(timeout 120 /tmp/lw/waits2d $n 2 | field us_per_wait)
    b=$(timeout 120 carry/bin/waits2d_cu $n 2 | field us_per_wait)
    echo "{\"round\":$r,\"n\":$n,\"nvcc_us_per_wait\":${a:-null},\"ours_us_per_wait\":${b:-null}}" >>"$out/launch-wait.jsonl"
  done
done
for exe in /tmp/lw/waits2d carry/bin/waits2d_cu; do
  echo "== $exe"
  timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 2000 --launch-count 20 \
    --csv "$exe" 2048 1 2>&1 | grep -v '^==PROF==' | tail -22
done >"$out/ncu.txt" 2>&1
cat "$out/probe.txt"
python3 - "$out/launch-wait.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for n in sorted({r["n"] for r in rows}):
    xs = [r["nvcc_us_per_wait"] for r in rows if r["n"] == n and r["nvcc_us_per_wait"] is not None]
    ys = [r["ours_us_per_wait"] for r in rows if r["n"] == n and r["ours_us_per_wait"] is not None]
    if xs and ys:
        a, b = statistics.median(xs), statistics.median(ys)
        print("waits2d N=%-5d nvcc %.3f us ours %.3f us per wait: %.3fx (%d rounds)" % (n, a, b, b / a, len(xs)))
PY
