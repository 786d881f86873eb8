#!/usr/bin/env bash
# Run ON THE GPU MACHINE after scripts/device/prepare here: every example on the GPU in the
# default mode, unpartitioned (HPVM_MGPU_PARTITION=off) and cut into 3 partitions on the one
# GPU (HPVM_MGPU_PARTITIONS=3); the three checksums must agree. Writes $OUT/one-gpu-modes.txt.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
declare -A args=([vecadd]="1000003" [matmul]="512" [stencil2d]="1024 512 7" [nbody]="5000 2" [sgemm_tiled]="256 512 128" [pipeline]="300 200" [histogram]="100000 33")
bad=0
for name in "${!args[@]}"; do
  sums=()
  for mode in default off parts3; do
    env=(HPVM_MGPU_DEVICES=cuda)
    [ $mode = off ] && env+=(HPVM_MGPU_PARTITION=off)
    [ $mode = parts3 ] && env+=(HPVM_MGPU_PARTITIONS=3)
    log="$out/$name.$mode.log"
    env "${env[@]}" HPVM_MGPU_STATS=1 timeout 120 carry/bin/$name ${args[$name]} >"$log" 2>&1
    rc=$?
    sums+=("$(grep -o 'checksum [0-9a-f]*' "$log" | cut -d' ' -f2):$rc:$(grep -o 'PASS\|FAIL' "$log" | head -1)")
  done
  verdict=same
  [ "${sums[0]}" = "${sums[1]}" ] && [ "${sums[0]}" = "${sums[2]}" ] || { verdict=DIFFERENT; bad=1; }
  echo "$name ${args[$name]}: ${sums[*]} $verdict" | tee -a "$out/one-gpu-modes.txt"
done
exit $bad
