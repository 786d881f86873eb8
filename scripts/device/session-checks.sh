#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool): a session's one-GPU checks in one call, each writing to
# $OUT as it goes (a call stopped at its limit keeps what finished).
# Carry carry/sub.txz (the test programs, launches_cu, startup_cu, open_probe, async_copies_cu
# and carry/cu, packed with `xz --lzma2=dict=256MiB`: the executables share the runtime, and
# a large window packs them 40x) and, for step 3, carry/hec.txz (scripts/hecbench-carry).
# Packed here, after scripts/device/prepare and the PolyBench builds into carry/cu/pb
# (see launch-bound.sh):
#   cd carry && names=$(grep -v '^#' ../scripts/device/test-programs.list | cut -d'|' -f1 |
#     while read n; do [ -x bin/test_${n}_cu ] && echo bin/test_${n}_cu || echo bin/${n}_cu; done)
#   tar cf - $names bin/launches_cu bin/startup_cu bin/open_probe bin/async_copies_cu cu |
#     xz -T2 --lzma2=preset=6,dict=256MiB >sub.txz
#   bash scripts/device/session-checks.sh [ROUNDS]      (default 5)
# 1. every CUDA test program (scripts/device/test-programs.sh) against its recorded checksum;
# 2. async_copies on one GPU, whole and in 3 partitions (its checksum on cpu:1 is given);
# 3. the carried HeCBench programs, ours against nvcc's build (scripts/device/hecbench.sh);
# 4. launches.cu against nvcc's build, graphs on and off, ROUNDS interleaved rounds;
# 5. the launch-bound PolyBench-ACC programs and start-up (scripts/device/launch-bound.sh).
set -u
out=${OUT:-/tmp/out}
rounds=${1:-5}
mkdir -p "$out" /tmp/sc
tar xJf carry/sub.txz -C carry
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/device.txt" 2>&1
bash scripts/device/test-programs.sh >"$out/test-programs.log" 2>&1
echo "test programs: exit $?" >>"$out/summary.txt"
for mode in one parts3; do
  env=(HPVM_MGPU_DEVICES=cuda:1)
  [ $mode = parts3 ] && env+=(HPVM_MGPU_PARTITIONS=3 HPVM_MGPU_PARTITION=always)
  echo "async_copies $mode: $(env "${env[@]}" timeout 60 carry/bin/async_copies_cu 4096 6 2>&1 | tr '\n' ' ') (cpu:1: 645ab047dced368c)" >>"$out/summary.txt"
done
[ -f carry/hec.txz ] && bash scripts/device/hecbench.sh "1" nvcc >"$out/hecbench.log" 2>&1
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc)
"$nvcc" -O3 -arch=sm_90 bench/cuda/launches.cu -o /tmp/sc/launches
ms() { "$@" 2>/dev/null | awk '/^kernel_ms/ {print $2}'; }
for args in "65536 1000" "4194304 300"; do
  ms /tmp/sc/launches $args >/dev/null
  ms env HPVM_MGPU_DEVICES=cuda:1 carry/bin/launches_cu $args >/dev/null
  for r in $(seq "$rounds"); do
    a=$(ms /tmp/sc/launches $args)
    b=$(ms env HPVM_MGPU_DEVICES=cuda:1 carry/bin/launches_cu $args)
    c=$(ms env HPVM_MGPU_DEVICES=cuda:1 HPVM_MGPU_GRAPHS=off carry/bin/launches_cu $args)
    echo "{\"args\":\"$args\",\"round\":$r,\"nvcc_ms\":${a:-null},\"ours_ms\":${b:-null},\"ours_graphs_off_ms\":${c:-null}}" >>"$out/launches.jsonl"
  done
done
bash scripts/device/launch-bound.sh "$rounds" >"$out/launch-bound.log" 2>&1
echo done >>"$out/summary.txt"
