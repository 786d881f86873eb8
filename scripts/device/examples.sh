#!/usr/bin/env bash
# Run ON THE GPU MACHINE (device tool), after scripts/device/prepare here:
#   bash scripts/device/examples.sh
# Runs every example on the GPU (HPVM_MGPU_DEVICES=cuda) and on the CPU fallback, at the
# default size and a larger one, and writes $OUT/examples.json plus one log per run.
set -u
bin=carry/bin
out=${OUT:-/tmp/out}
mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "GPU: $gpu"
declare -A big=([vecadd]="16777216" [matmul]="1024" [stencil2d]="1024 1024 20" [nbody]="8192 4" [sgemm_tiled]="1024 1024 1024" [pipeline]="1024 1024")
json="["
sep=""
for exe in "$bin"/*; do
  name=$(basename "$exe")
  for size in default big; do
    args=""
    [ "$size" = big ] && args=${big[$name]:-}
    for dev in cuda cpu; do
      log="$out/$name.$size.$dev.log"
      start=$(date +%s.%N)
      HPVM_MGPU_DEVICES=$dev HPVM_MGPU_STATS=1 timeout 300 "$exe" $args >"$log" 2>&1
      rc=$?
      secs=$(python3 -c "print(round($(date +%s.%N) - $start, 3))")
      verdict=$(grep -o 'PASS\|FAIL' "$log" | head -1)
      sum=$(grep -o 'checksum [0-9a-f]*' "$log" | cut -d' ' -f2)
      printf '%-12s %-7s %-4s rc=%-3s %-4s %6.2fs %s\n' "$name" "$size" "$dev" "$rc" "${verdict:-none}" "$secs" "$sum"
      json+="$sep{\"example\":\"$name\",\"size\":\"$size\",\"args\":\"$args\",\"device\":\"$dev\",\"rc\":$rc,\"verdict\":\"${verdict:-none}\",\"seconds\":$secs,\"checksum\":\"$sum\"}"
      sep=","
    done
  done
done
# The streaming mode of the pipeline, on the GPU.
HPVM_MGPU_DEVICES=cuda HPVM_MGPU_STATS=1 timeout 300 "$bin/pipeline" --stream 8 512 512 >"$out/pipeline.stream.cuda.log" 2>&1
echo "pipeline --stream 8 512 512 cuda rc=$? $(grep -o 'PASS\|FAIL' "$out/pipeline.stream.cuda.log")"
echo "$json]" >"$out/examples.json"
echo "{\"gpu\":\"$gpu\",\"commit\":\"$(cat carry/commit 2>/dev/null)\"}" >"$out/machine.json"
