#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/cuda.sh "GPU COUNTS" REPEATS CASE...
# e.g. bash scripts/device/cuda.sh "1 2" 5 "stencil2d 8192 200" "matmul 8192 5"
# CUDA programs of bench/cuda/ and, named thesis_NAME, bench/programs/NAME.cu (each prints `kernel_ms` between two CUDA events and a
# `checksum`), built by hpvm-mgpu (carry/bin/NAME_cu) and, as the baseline, by the machine's nvcc
# against NVIDIA's runtime (one GPU) and, where scripts/device/clang-link made carry/clang/bin/NAME,
# by plain clang++-19 -x cuda against the wheel's libcudart (one GPU). Each runs REPEATS times per configuration; the first run
# of each is a warm-up and is kept but marked. Writes one JSON row per run to
# $OUT/cuda.jsonl: configuration, wall seconds, kernel_ms, checksum, exit status.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
counts=$1
repeats=$2
shift 2
arch=${CUDA_ARCH:-sm_90}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
mkdir -p /tmp/nvcc
for case in "$@"; do
  read -r name args <<<"$case"
  # thesis_NAME: the thesis's programs, bench/programs/NAME.cu.
  src=bench/cuda/$name.cu bin=carry/bin/${name}_cu
  case $name in thesis_*) src=bench/programs/${name#thesis_}.cu bin=carry/bin/$name ;; esac
  configs=""
  if [ -n "$nvcc" ] && "$nvcc" -O3 -arch="$arch" -o "/tmp/nvcc/$name" "$src" >"$out/logs/$name.nvcc-build.log" 2>&1; then
    configs="nvcc"
  fi
  [ -x "carry/clang/bin/$name" ] && configs="$configs clang"
  for g in $counts; do configs="$configs hpvm:$g"; done
  for config in $configs; do
    for r in $(seq 1 "$repeats"); do
      log="$out/logs/$name.${config/:/}.$r.log"
      if [ "$config" = nvcc ]; then
        cmd=(/tmp/nvcc/$name $args)
      elif [ "$config" = clang ]; then
        cmd=(carry/clang/bin/$name $args)
      else
        cmd=(env HPVM_MGPU_DEVICES=cuda:${config#hpvm:} "$bin" $args)
      fi
      start=$(date +%s.%N)
      timeout 600 "${cmd[@]}" >"$log" 2>&1
      rc=$?
      wall=$(python3 -c "print(round($(date +%s.%N) - $start, 4))")
      ms=$(grep -o 'kernel_ms [0-9.]*' "$log" | cut -d' ' -f2)
      sum=$(grep -o 'checksum [0-9a-f]*' "$log" | cut -d' ' -f2)
      echo "{\"program\":\"$name\",\"args\":\"$args\",\"config\":\"$config\",\"run\":$r,\"warmup\":$([ "$r" = 1 ] && echo true || echo false),\"rc\":$rc,\"wall_s\":$wall,\"kernel_ms\":${ms:-null},\"checksum\":\"$sum\"}" >>"$out/cuda.jsonl"
      printf '%-10s %-8s run %d rc=%d wall %7.3fs kernel %10s ms %s\n' "$name" "$config" "$r" "$rc" "$wall" "${ms:-?}" "$sum"
    done
  done
done
