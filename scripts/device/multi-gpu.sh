#!/usr/bin/env bash
# Run ON A MULTI-GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/multi-gpu.sh [GPUS]          (default: every visible GPU)
# EXAMPLES="matmul nbody" and SIZES="big" narrow the runs (default: every example, both sizes).
# Every example at two sizes on 1 GPU and on GPUS GPUs, plus GPUS GPUs cut into 3 partitions
# each and with uneven weights: every run must print PASS with the 1-GPU checksum, and the
# statistics must show the partitionable nodes split over all GPUs. Writes
# $OUT/multi-gpu.json (one row per run) and $OUT/multi-gpu.txt; exits 1 on any mismatch.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
g=${1:-$(nvidia-smi -L | wc -l)}
weights=$(python3 -c "print(','.join(str(k + 1) for k in range($g)))")
declare -A small=([vecadd]="1000003" [matmul]="512" [stencil2d]="1024 512 7" [nbody]="5000 2" [sgemm_tiled]="256 512 128" [pipeline]="300 200" [histogram]="100000 33")
declare -A big=([vecadd]="16777216" [matmul]="2048" [stencil2d]="4096 4096 20" [nbody]="20000 3" [sgemm_tiled]="1024 2048 512" [pipeline]="1024 1024" [histogram]="10000000 256")
bad=0
rows=""
sep=""
for name in ${EXAMPLES:-vecadd matmul stencil2d nbody sgemm_tiled pipeline histogram}; do
  for size in ${SIZES:-small big}; do
    if [ $size = small ]; then args=${small[$name]}; else args=${big[$name]}; fi
    ref=""
    for mode in one many parts3 weights; do
      env=(HPVM_MGPU_DEVICES=cuda:$g)
      case $mode in
        one) env=(HPVM_MGPU_DEVICES=cuda:1) ;;
        parts3) env+=(HPVM_MGPU_PARTITIONS=3) ;;
        weights) env+=(HPVM_MGPU_WEIGHTS=$weights) ;;
      esac
      log="$out/logs/$name.$size.$mode.log"
      env "${env[@]}" HPVM_MGPU_STATS=1 timeout 300 carry/bin/$name $args >"$log" 2>&1
      rc=$?
      sum=$(grep -o 'checksum [0-9a-f]*' "$log" | cut -d' ' -f2 | tr '\n' ' ' | sed 's/ $//')
      verdict=$(grep -o 'PASS\|FAIL' "$log" | head -1)
      split=$(grep -o 'partitioned (up to [0-9]* devices)' "$log" | grep -o '[0-9]*' | sort -n | tail -1)
      [ $mode = one ] && ref=$sum
      ok=yes
      { [ $rc = 0 ] && [ "${verdict:-none}" = PASS ] && [ "$sum" = "$ref" ]; } || { ok=NO; bad=1; }
      line=$(printf '%-12s %-6s %-8s rc=%-3s %-4s devices-used=%-2s %s %s' "$name" "$size" "$mode" "$rc" "${verdict:-none}" "${split:-0}" "$sum" "$ok")
      echo "$line" | tee -a "$out/multi-gpu.txt"
      rows+="$sep{\"example\":\"$name\",\"args\":\"$args\",\"mode\":\"$mode\",\"env\":\"${env[*]}\",\"rc\":$rc,\"verdict\":\"${verdict:-none}\",\"checksum\":\"$sum\",\"max_devices_used\":${split:-0},\"matches_one_gpu\":\"$ok\"}"
      sep=","
    done
  done
done
# The streaming pipeline over every GPU.
HPVM_MGPU_DEVICES=cuda:$g HPVM_MGPU_STATS=1 timeout 300 carry/bin/pipeline --stream 8 512 512 >"$out/logs/pipeline.stream.log" 2>&1
echo "pipeline --stream 8 512 512 on $g GPUs: rc=$? $(grep -o 'PASS\|FAIL' "$out/logs/pipeline.stream.log" | head -1)" | tee -a "$out/multi-gpu.txt"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "{\"device\":\"$g x $gpu\",\"commit\":\"$(cat carry/commit 2>/dev/null)\",\"command\":\"bash scripts/device/multi-gpu.sh $g\",\"runs\":[$rows]}" >"$out/multi-gpu.json"
exit $bad
