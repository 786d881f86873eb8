#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/tricky.sh "GPU COUNTS"        e.g. "1 2"
# The corpus of tricky programs (tests/tricky/: pointers kept in memory, inline PTX, half
# precision, symbol copies, launch limits, reads past a buffer), built by hpvm-mgpu
# (carry/bin/tricky_NAME) and, as the reference, by the machine's nvcc against NVIDIA's
# runtime. Each program checks itself (PASS) and prints a checksum; every configuration must
# pass, and hpvm's checksums must equal nvcc's where the program is deterministic on a GPU.
# Writes one JSON row per run to $OUT/tricky.jsonl and the logs to $OUT/tricky-logs/.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/tricky-logs" /tmp/nvcc-tricky
counts=$1
arch=${CUDA_ARCH:-sm_90}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
for src in tests/tricky/*.cu; do
  name=$(basename "$src" .cu)
  configs=""
  if [ -n "$nvcc" ] && "$nvcc" -O3 -arch="$arch" -o "/tmp/nvcc-tricky/$name" "$src" >"$out/tricky-logs/$name.nvcc-build.log" 2>&1; then
    configs="nvcc"
  fi
  for g in $counts; do configs="$configs hpvm:$g"; done
  for config in $configs; do
    log="$out/tricky-logs/$name.${config/:/}.log"
    if [ "$config" = nvcc ]; then
      cmd=(/tmp/nvcc-tricky/$name)
    else
      cmd=(env HPVM_MGPU_DEVICES=cuda:${config#hpvm:} HPVM_MGPU_PARTITION=always carry/bin/tricky_$name)
    fi
    start=$(date +%s.%N)
    timeout 120 "${cmd[@]}" >"$log" 2>&1
    rc=$?
    wall=$(python3 -c "print(round($(date +%s.%N) - $start, 4))")
    pass=$(grep -c '^PASS' "$log")
    sum=$(grep -o 'checksum [0-9a-f]*' "$log" | cut -d' ' -f2)
    echo "{\"program\":\"$name\",\"config\":\"$config\",\"rc\":$rc,\"pass\":$([ "$pass" -gt 0 ] && echo true || echo false),\"wall_s\":$wall,\"checksum\":\"$sum\"}" >>"$out/tricky.jsonl"
    printf '%-24s %-8s rc=%d pass=%s wall %7.3fs %s\n' "$name" "$config" "$rc" "$pass" "$wall" "$sum"
  done
done
