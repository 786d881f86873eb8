#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool): PolyBench-ACC's CUDA programs, unchanged, built here by
# `scripts/polybench-acc build` (carry/cu/pb/NAME) and there by nvcc from the same sources
# (carry/cu/src, the checkout's CUDA/ folder): each run prints its GPU time (PolyBench's timer
# around the launches) and how many elements differ from its own CPU computation beyond its
# tolerance. Runs nvcc's build and ours on each GPU count, REPEATS times each.
#   bash scripts/device/polybench.sh "GPU COUNTS" REPEATS [NAMES...]
# PB_DIR (default carry/cu/pb) holds our executables; PB_FLAGS (e.g. -DEXTRALARGE_DATASET)
# must be the flags they were built with, which nvcc gets too. PB_CLANG (e.g. carry/clang/pbx)
# names a folder of the same programs built by plain clang (scripts/device/clang-link): another
# one-GPU baseline. PB_STATS=1 runs ours with HPVM_MGPU_STATS=1 and packs every log into
# $OUT/polybench-logs.tgz. PB_CHECK (e.g. "hpvm:1") lists the configurations that run to the
# end, CPU check included; the others stop once they have printed their GPU time (the suite's
# CPU reference takes minutes at the large sizes). Default: all run to the end. Writes one JSON row per run to
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
# nvcc builds, in parallel (the suite's Makefiles: nvcc -O3 FILE.cu -I utilities). CUDA 13's
# nvcc no longer declares cudaThreadSynchronize, which the suite calls: its replacement (the
# same call since CUDA 4) stands in.
for name in $names; do
  cu=$(ls $src/*/*/$name.cu $src/*/*/*/$name.cu 2>/dev/null | head -1)
  [ -n "$nvcc" ] && [ -n "$cu" ] && echo "$nvcc -O3 -arch=$arch $flags -DcudaThreadSynchronize=cudaDeviceSynchronize -I $src/utilities -I $(dirname "$cu") $cu -o /tmp/pbn/$name >/tmp/pblogs/$name.nvcc.log 2>&1"
done | xargs -P 16 -I{} sh -c '{}'
cat /tmp/pblogs/*.nvcc.log >"$out/polybench-nvcc.log" 2>/dev/null
for name in $names; do
  configs=""
  [ -x /tmp/pbn/$name ] && configs="nvcc"
  [ -n "${PB_CLANG:-}" ] && [ -x "$PB_CLANG/$name" ] && configs="$configs clang"
  for g in $counts; do configs="$configs hpvm:$g"; done
  for config in $configs; do
    for r in $(seq 1 "$repeats"); do
      log=/tmp/pblogs/$name.${config/:/}.$r.log
      if [ "$config" = nvcc ]; then
        cmd=(/tmp/pbn/$name)
      elif [ "$config" = clang ]; then
        cmd=("$PB_CLANG/$name")
      else
        cmd=(env HPVM_MGPU_DEVICES=cuda:${config#hpvm:} HPVM_MGPU_STATS=${PB_STATS:-0} "$dir/$name")
      fi
      start=$(date +%s.%N)
      if [ -z "${PB_CHECK:-}" ] || grep -qw -- "$config" <<<"$PB_CHECK"; then
        timeout ${PB_TIMEOUT:-120} "${cmd[@]}" >"$log" 2>&1
        rc=$?
      else
        # Line-buffered, so the GPU time is in the log the moment it is printed.
        timeout ${PB_TIMEOUT:-120} stdbuf -oL "${cmd[@]}" >"$log" 2>&1 &
        pid=$!
        while kill -0 $pid 2>/dev/null; do
          if grep -A1 'GPU Time in seconds' "$log" | tail -n +2 | grep -q '[0-9]'; then
            kill $pid 2>/dev/null
            break
          fi
          sleep 0.1
        done
        wait $pid
        rc=$?
        [ $rc = 143 ] && rc=stopped
      fi
      wall=$(python3 -c "print(round($(date +%s.%N) - $start, 3))")
      gpu=$(grep -A1 'GPU Time in seconds' "$log" | tail -1 | tr -d ' ')
      bad=$(grep -o 'Threshold of [0-9.]* Percent: [0-9]*' "$log" | awk '{s += $NF} END {print s + 0}')
      [ "$rc" = stopped ] && bad=null
      echo "{\"program\":\"$name\",\"config\":\"$config\",\"run\":$r,\"rc\":\"$rc\",\"wall_s\":$wall,\"gpu_s\":${gpu:-null},\"mismatches\":$bad}" >>"$out/polybench.jsonl"
      printf '%-14s %-7s run %d rc=%-7s wall %7.3fs gpu %10ss mismatches %s\n' "$name" "$config" "$r" "$rc" "$wall" "${gpu:-?}" "$bad"
    done
  done
done
[ "${PB_STATS:-0}" = 1 ] && tar czf "$out/polybench-logs.tgz" -C /tmp pblogs
exit 0
