#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool): PolyBench-ACC's CUDA programs, unchanged, built here by
# `scripts/polybench-acc build` (carry/cu/pb/NAME) and there by nvcc from the same sources
# (carry/cu/src, the checkout's CUDA/ folder): each run prints its GPU time (PolyBench's timer
# around the launches) and how many elements differ from its own CPU computation beyond its
# tolerance. Runs nvcc's build and ours on each GPU count, REPEATS times each.
#   bash scripts/device/polybench.sh "GPU COUNTS" REPEATS [NAMES...]
# PB_DIR (default carry/cu/pb) holds our executables; PB_FLAGS (e.g. -DEXTRALARGE_DATASET)
# must be the flags they were built with, which nvcc gets too. Writes one JSON row per run to
# $OUT/polybench.jsonl; the nvcc build logs go to $OUT/polybench-nvcc.log.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/pbn /tmp/pblogs
counts=$1
repeats=$2
shift 2
arch=${CUDA_ARCH:-sm_90}
src=carry/cu/src
dir=${PB_DIR:-carry/cu/pb}
flags=${PB_FLAGS:-}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
names=${*:-$(for f in "$dir"/*; do [ -f "$f" ] && [ -x "$f" ] && basename "$f"; done)}
# nvcc builds, in parallel (the suite's Makefiles: nvcc -O3 FILE.cu -I utilities).
for name in $names; do
  cu=$(ls $src/*/*/$name.cu $src/*/*/*/$name.cu 2>/dev/null | head -1)
  [ -n "$nvcc" ] && [ -n "$cu" ] && echo "$nvcc -O3 -arch=$arch $flags -I $src/utilities -I $(dirname "$cu") $cu -o /tmp/pbn/$name >/tmp/pblogs/$name.nvcc.log 2>&1"
done | xargs -P 16 -I{} sh -c '{}'
cat /tmp/pblogs/*.nvcc.log >"$out/polybench-nvcc.log" 2>/dev/null
for name in $names; do
  configs=""
  [ -x /tmp/pbn/$name ] && configs="nvcc"
  for g in $counts; do configs="$configs hpvm:$g"; done
  for config in $configs; do
    for r in $(seq 1 "$repeats"); do
      log=/tmp/pblogs/$name.${config/:/}.$r.log
      if [ "$config" = nvcc ]; then
        cmd=(/tmp/pbn/$name)
      else
        cmd=(env HPVM_MGPU_DEVICES=cuda:${config#hpvm:} "$dir/$name")
      fi
      start=$(date +%s.%N)
      timeout ${PB_TIMEOUT:-120} "${cmd[@]}" >"$log" 2>&1
      rc=$?
      wall=$(python3 -c "print(round($(date +%s.%N) - $start, 3))")
      gpu=$(grep -A1 'GPU Time in seconds' "$log" | tail -1 | tr -d ' ')
      bad=$(grep -o 'Threshold of [0-9.]* Percent: [0-9]*' "$log" | awk '{s += $NF} END {print s + 0}')
      echo "{\"program\":\"$name\",\"config\":\"$config\",\"run\":$r,\"rc\":$rc,\"wall_s\":$wall,\"gpu_s\":${gpu:-null},\"mismatches\":$bad}" >>"$out/polybench.jsonl"
      printf '%-14s %-7s run %d rc=%-3d wall %7.3fs gpu %10ss mismatches %s\n' "$name" "$config" "$r" "$rc" "$wall" "${gpu:-?}" "$bad"
    done
  done
done
