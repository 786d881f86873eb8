#!/usr/bin/env bash
# Run ON THE GPU MACHINE after scripts/device/prepare here. Questions the runtime's design
# depends on, answered outside and inside the runtime (results to $OUT/probes.txt):
#  1. does plain host code slow down once CUDA is in the process, and at which step
#     (bench/probes/cuda_probe.c `host`);
#  2. what page-locking costs, whole and in parallel chunks, and what it buys (`pin`);
#  3. nbody's velocity kernel: registers and resident blocks per SM, ncu's view of one
#     launch, and the per-GPU kernel times on GPU 0 alone, GPU 1 alone and both.
#  4. the matmul example's reference check with every thread held on the same cores, on the
#     CPU fallback and on the GPUs (is the slowdown the runtime's, or where the thread ran?)
#  5. the same check on cores 8-15 with the CPU fallback on ONE worker thread, and on the
#     GPUs with a busy loop on another core of the set (does the rest of the chip being busy
#     make the host loop faster?)
#  6. the loop with no CUDA and no runtime at all, before and after 8 threads computed the
#     same product (what the CPU fallback does before the check): `hostpar`
#   bash scripts/device/probes.sh [SECTIONS]   (default "host cores pin nbody matmul busy hostpar")
# Environment: BODIES (262144), PIN_GIB (5), PIN_THREADS (16), CORES (8).
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
sections=${1:-host cores pin nbody matmul busy hostpar}
bodies=${BODIES:-262144}
gib=${PIN_GIB:-5}
threads=${PIN_THREADS:-16}
cores=${CORES:-8}
want() { [[ " $sections " == *" $1 "* ]]; }
log=$out/probes.txt
exec > >(tee -a "$log") 2>&1
echo "commit $(cat carry/commit)  $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)  $(uname -r)  $(nproc) cores"
grep -E "MemTotal|Hugepagesize" /proc/meminfo
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/module/nvidia_uvm/parameters/uvm_disable_hmm 2>/dev/null
if want host; then
  echo "== 1. host code after CUDA steps"
  carry/bin/cuda_probe host 1024
fi
if want cores; then
  echo "== 1b. each core's speed"
  carry/bin/cuda_probe cores 1024
fi
if want pin; then
  echo "== 2. page-locking"
  carry/bin/cuda_probe pin "$gib" "$threads"
fi
if want nbody; then
echo "== 3. nbody $bodies"
carry/bin/cuda_probe occupancy carry/ptx/nbody.ptx hpvm_kernel_UpdateVelocity 256
carry/bin/cuda_probe occupancy carry/ptx/nbody.ptx hpvm_kernel_UpdateVelocity_nc 256
nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv
run() { # label, env...
  local label=$1; shift
  rm -f /tmp/nb.json
  env "$@" HPVM_EXAMPLE_SKIP_CHECK=1 HPVM_MGPU_STATS=/tmp/nb.json carry/bin/nbody "$bodies" 4 >/dev/null 2>&1
  python3 - "$label" <<'PY'
import json, sys
s = json.load(open("/tmp/nb.json"))
for n in s["nodes"]:
    if n["gpu_kernels_ms"]:
        k = n["gpu_kernels_ms"]
        print(f'{sys.argv[1]:34s} {n["node"]:16s} kernels {n["gpu_ms_kernels"]:8.2f} ms  peer {n["gpu_ms_peer_copies"]:6.2f} ms  per kernel: {" ".join(f"{x:.2f}" for x in k[:12])}')
PY
}
for r in 1 2; do
  run "GPU 0 alone" CUDA_VISIBLE_DEVICES=0 HPVM_MGPU_DEVICES=cuda:1
  run "GPU 1 alone" CUDA_VISIBLE_DEVICES=1 HPVM_MGPU_DEVICES=cuda:1
  run "both" HPVM_MGPU_DEVICES=cuda:2
  run "both, 2 partitions each" HPVM_MGPU_DEVICES=cuda:2 HPVM_MGPU_PARTITIONS=2
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$ncu" ]; then
  for g in 1 2; do
    echo "-- ncu, cuda:$g, first velocity kernel on GPU 0"
    CUDA_VISIBLE_DEVICES=0,1 HPVM_MGPU_DEVICES=cuda:$g HPVM_EXAMPLE_SKIP_CHECK=1 timeout 300 "$ncu" --clock-control none \
      --kernel-name regex:UpdateVelocity --launch-count 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats carry/bin/nbody "$bodies" 1 2>&1 |
      grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Compute \(SM\) Throughput|Memory Throughput|Grid Size|Block Limit|Warp Cycles Per Issued|Issue Slots|Stall|SM Frequency" | head -30
  done
else
  echo "no ncu"
fi
fi
if want matmul; then
  echo "== 4. matmul 1024's check, all threads on core $cores, then on cores $cores-$((cores + 7))"
  secs() { local s=$(date +%s.%N); env "$@" carry/bin/matmul 1024 >/dev/null 2>&1; python3 -c "print(round($(date +%s.%N) - $s, 3))"; }
  for set in "$cores" "$cores-$((cores + 7))"; do
    for mode in "HPVM_MGPU_DEVICES=cpu" "HPVM_MGPU_DEVICES=cuda:1" "HPVM_MGPU_DEVICES=cuda"; do
      with=(); without=()
      for i in 1 2; do
        with+=("$(secs $mode taskset -c $set)"); without+=("$(secs $mode HPVM_EXAMPLE_SKIP_CHECK=1 taskset -c $set)")
      done
      echo "cores $set, $mode: with check ${with[*]} s; without ${without[*]} s"
    done
  done
  grep -i nvidia /proc/interrupts | head -8
fi
if want busy; then
  set8="$cores-$((cores + 7))"
  echo "== 5. matmul 1024's check on cores $set8: one worker thread; a busy core beside"
  secs() { local s=$(date +%s.%N); env "$@" carry/bin/matmul 1024 >/dev/null 2>&1; python3 -c "print(round($(date +%s.%N) - $s, 3))"; }
  for mode in "HPVM_MGPU_DEVICES=cpu HPVM_MGPU_THREADS=1" "HPVM_MGPU_DEVICES=cpu" "HPVM_MGPU_DEVICES=cuda"; do
    with=(); without=()
    for i in 1 2; do
      with+=("$(secs $mode taskset -c $set8)"); without+=("$(secs $mode HPVM_EXAMPLE_SKIP_CHECK=1 taskset -c $set8)")
    done
    echo "cores $set8, $mode: with check ${with[*]} s; without ${without[*]} s"
  done
  taskset -c $((cores + 7)) sh -c 'while :; do :; done' &
  spin=$!
  for mode in "HPVM_MGPU_DEVICES=cuda" "HPVM_MGPU_DEVICES=cpu HPVM_MGPU_THREADS=1"; do
    with=(); without=()
    for i in 1 2; do
      with+=("$(secs $mode taskset -c $cores-$((cores + 6)))"); without+=("$(secs $mode HPVM_EXAMPLE_SKIP_CHECK=1 taskset -c $cores-$((cores + 6)))")
    done
    echo "cores $cores-$((cores + 6)) with core $((cores + 7)) spinning, $mode: with check ${with[*]} s; without ${without[*]} s"
  done
  kill $spin
fi
if want hostpar; then
  echo "== 6. the loop with no runtime, before and after an 8-thread pass (cores $cores-$((cores + 7)))"
  taskset -c $cores-$((cores + 7)) carry/bin/cuda_probe host-par 1024
fi
