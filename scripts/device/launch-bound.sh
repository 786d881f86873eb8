#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool): issue 42's one-GPU figures, interleaved with nvcc's
# builds so that both see the same machine minute by minute (ratios moved by 10% between
# machines of one kind, never within a call):
# - the launch-bound PolyBench-ACC programs (PB_DIR, default carry/cu/pb, built here by
#   `scripts/polybench-acc build`; their sources in carry/cu/src, the checkout's CUDA/ folder),
#   PolyBench's GPU timer, each run stopped once it has printed it (PB_SRC overrides the sources);
# - start-up: bench/cuda/startup.cu built by nvcc and by us (carry/bin/startup_cu), whole
#   process wall with the driver's JIT cache off, beside the bare driver's opening
#   (carry/bin/open_probe, bench/probes/open_probe.c).
#   bash scripts/device/launch-bound.sh ROUNDS [NAMES...]   (default names: lu jacobi1D
#   3DConvolution adi fdtd2d)
# Writes $OUT/launch-bound.jsonl (one row per run) and prints the medians' ratios.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/lbn
rounds=${1:-7}
shift
names=${*:-lu jacobi1D 3DConvolution adi fdtd2d}
src=${PB_SRC:-carry/cu/src}
dir=${PB_DIR:-carry/cu/pb}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || { echo "no nvcc" >&2; exit 1; }
for name in $names; do
  cu=$(ls $src/*/*/$name.cu $src/*/*/*/$name.cu 2>/dev/null | head -1)
  [ -n "$cu" ] && echo "$nvcc -O3 -arch=sm_90 -DcudaThreadSynchronize=cudaDeviceSynchronize -I $src/utilities -I $(dirname "$cu") $cu -o /tmp/lbn/$name"
done | xargs -P 8 -I{} sh -c '{} >/dev/null 2>&1'
"$nvcc" -O3 -arch=sm_90 bench/cuda/startup.cu -o /tmp/lbn/startup >/dev/null 2>&1
gpu_time() {
  # PolyBench's GPU time of "$@"; the run stops once it is printed (the CPU check can take minutes).
  local log=/tmp/lbn/run.log
  timeout 120 stdbuf -oL "$@" >$log 2>&1 &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    grep -A1 'GPU Time in seconds' $log | tail -n +2 | grep -q '[0-9]' && { kill $pid 2>/dev/null; break; }
    sleep 0.05
  done
  wait $pid 2>/dev/null
  grep -A1 'GPU Time in seconds' $log | tail -1 | tr -d ' '
}
wall() {
  local s=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 4))" "$s" "$(date +%s.%N)"
}
# One unrecorded run of each first: nothing is measured on a fresh GPU.
for name in $names; do
  gpu_time /tmp/lbn/$name >/dev/null
  gpu_time env HPVM_MGPU_DEVICES=cuda:1 "$dir/$name" >/dev/null
done
for r in $(seq "$rounds"); do
  for name in $names; do
    a=$(gpu_time /tmp/lbn/$name)
    b=$(gpu_time env HPVM_MGPU_DEVICES=cuda:1 "$dir/$name")
    echo "{\"program\":\"$name\",\"round\":$r,\"nvcc_gpu_s\":${a:-null},\"ours_gpu_s\":${b:-null}}" >>"$out/launch-bound.jsonl"
  done
  if [ -x carry/bin/startup_cu ]; then
    p=$([ -x carry/bin/open_probe ] && CUDA_CACHE_DISABLE=1 wall carry/bin/open_probe one || echo null)
    a=$(CUDA_CACHE_DISABLE=1 wall /tmp/lbn/startup)
    b=$(CUDA_CACHE_DISABLE=1 HPVM_MGPU_DEVICES=cuda:1 wall carry/bin/startup_cu)
    echo "{\"program\":\"startup\",\"round\":$r,\"driver_alone_s\":$p,\"nvcc_wall_s\":$a,\"ours_wall_s\":$b}" >>"$out/launch-bound.jsonl"
  fi
done
python3 - "$out/launch-bound.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for name in dict.fromkeys(r["program"] for r in rows):
    mine = [r for r in rows if r["program"] == name]
    k = ("nvcc_wall_s", "ours_wall_s") if name == "startup" else ("nvcc_gpu_s", "ours_gpu_s")
    xs = [r[k[0]] for r in mine if r[k[0]] is not None]
    ys = [r[k[1]] for r in mine if r[k[1]] is not None]
    if not xs or not ys:
        print("%-14s no figures (see the logs)" % name)
        continue
    a, b = statistics.median(xs), statistics.median(ys)
    extra = " (%+.1f ms)" % ((b - a) * 1e3) if name == "startup" else ""
    print("%-14s nvcc %.6f ours %.6f ratio %.3f%s (%d rounds)" % (name, a, b, b / a, extra, len(mine)))
PY
