#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/sparse.sh GPUS REPEATS "NAME|ARGS|LIMIT"...
# e.g. bash scripts/device/sparse.sh 1 3 "stencil2d_cu|16384 20|1536M"
# Sparse device copies (runtime/src/memory/residency.rs) on GPUs: each program (carry/bin/NAME)
# runs on cuda:GPUS with whole copies (the default on GPUs), with sparse copies
# (HPVM_MGPU_SPARSE=on) and with sparse copies under HPVM_MGPU_DEVICE_MEMORY=LIMIT (eviction,
# rounds of partitions where one launch does not fit), REPEATS times each, the first a
# warm-up. Every run must print the same checksum. Writes $OUT/sparse.jsonl (one row per run:
# mode, wall, kernel_ms, checksum, rc, and the statistics' device memory) and exits 1 on a
# mismatch.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
g=$1
repeats=$2
shift 2
bad=0
for case in "$@"; do
  IFS='|' read -r name args limit <<<"$case"
  ref=""
  for mode in whole sparse limited; do
    case $mode in
      whole) env=(HPVM_MGPU_SPARSE=off) ;;
      sparse) env=(HPVM_MGPU_SPARSE=on) ;;
      limited) env=(HPVM_MGPU_DEVICE_MEMORY=$limit) ;;
    esac
    for r in $(seq 1 "$repeats"); do
      log=$out/logs/$name.$mode.$r.log
      stats=$out/logs/$name.$mode.$r.json
      start=$(date +%s.%N)
      env "${env[@]}" HPVM_MGPU_DEVICES=cuda:$g HPVM_MGPU_STATS="$stats" timeout 300 carry/bin/$name $args >"$log" 2>&1
      rc=$?
      wall=$(python3 -c "print(round($(date +%s.%N) - $start, 4))")
      ms=$(grep -o 'kernel_ms [0-9.]*' "$log" | cut -d' ' -f2)
      sum=$(grep -o 'checksum [0-9a-f]*' "$log" | head -1 | cut -d' ' -f2)
      [ -z "$ref" ] && ref=$sum
      same=yes
      { [ "$rc" = 0 ] && [ "$sum" = "$ref" ]; } || { same=NO; bad=1; }
      mem=$(python3 -c "import json,sys; print(json.dumps(json.load(open('$stats')).get('device_memory', [])))" 2>/dev/null || echo null)
      echo "{\"program\":\"$name\",\"args\":\"$args\",\"gpus\":$g,\"mode\":\"$mode\",\"env\":\"${env[*]}\",\"run\":$r,\"warmup\":$([ "$r" = 1 ] && echo true || echo false),\"rc\":$rc,\"wall_s\":$wall,\"kernel_ms\":${ms:-null},\"checksum\":\"$sum\",\"same_as_whole\":\"$same\",\"device_memory\":$mem}" >>"$out/sparse.jsonl"
      printf '%-14s %-8s run %d rc=%d wall %7.3fs kernel %10s ms %s %s\n' "$name" "$mode" "$r" "$rc" "$wall" "${ms:-?}" "$sum" "$same"
      [ "$rc" = 0 ] || tail -3 "$log"
    done
  done
done
exit $bad
