#!/usr/bin/env bash
# Run ON THE GPU MACHINE (device tool), after scripts/device/prepare here:
#   bash scripts/device/bench.sh
# Kernel time of our compiled examples against the same algorithms compiled by nvcc -O3
# (scripts/device/bench/reference.cu), both timed the same way: CUDA events, 3 warm-up runs,
# median of 11 (ours through HPVM_MGPU_BENCH_REPEAT=11 and the HPVM_MGPU_STATS report).
# Writes $OUT/bench.json.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
arch=${ARCH:-sm_90}
nvcc -O3 -arch="$arch" -o "$out/reference" scripts/device/bench/reference.cu || exit 1
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
commit=$(cat carry/commit 2>/dev/null)
# name | our program's arguments | reference arguments | our node whose kernel is compared
cases=(
  "matmul|4096|4096|MatMulBlocks"
  "stencil2d|8192 8192 10|8192 8192|StencilBlocks"
  "nbody|65536 2|65536|UpdateVelocity"
  "sgemm_tiled|4096 4096 4096|4096 4096 4096|SgemmBlock"
)
rows=""
sep=""
printf '%-12s %-16s %12s %12s %8s\n' bench size "ours ms" "nvcc ms" ratio
for c in "${cases[@]}"; do
  IFS='|' read -r name ours theirs node <<<"$c"
  ref=$("$out/reference" $name $theirs) || exit 1
  ref_ms=$(echo "$ref" | sed 's/.*"median_ms":\([0-9.]*\).*/\1/')
  log="$out/$name.log"
  HPVM_MGPU_DEVICES=cuda HPVM_MGPU_STATS=1 HPVM_MGPU_BENCH_REPEAT=11 HPVM_EXAMPLE_SKIP_CHECK=1 carry/bin/$name $ours >"$log" 2>&1 || { echo "$name failed"; cat "$log"; exit 1; }
  # Median over the program's launches of each launch's warm median.
  ours_ms=$(grep "^  $node " "$log" | sed 's/.*median \([0-9.]*\) ms.*/\1/')
  samples=("$ours_ms")
  ratio=$(python3 -c "print(f'{$ours_ms / $ref_ms:.3f}')")
  printf '%-12s %-16s %12s %12s %8s\n' "$name" "$ours" "$ours_ms" "$ref_ms" "$ratio"
  rows+="$sep{\"bench\":\"$name\",\"args\":\"$ours\",\"ours_median_ms\":$ours_ms,\"nvcc\":$ref,\"ratio\":$ratio,\"samples_ms\":[$(IFS=,; echo "${samples[*]}")]}"
  sep=","
done
for k in matmul stencil2d nbody sgemm_tiled; do
  echo "== $k: ours (ptxas)"; ptxas -arch="$arch" -v carry/ptx/$k.ptx -o /dev/null 2>&1 | grep -i "registers\|spill" | head -4
done
echo "== nvcc (ptxas)"; nvcc -O3 -arch="$arch" -Xptxas -v -c -o /dev/null scripts/device/bench/reference.cu 2>&1 | grep -i "Compiling\|registers" | head -12
echo "{\"device\":\"$gpu\",\"commit\":\"$commit\",\"arch\":\"$arch\",\"command\":\"bash scripts/device/bench.sh\",\"results\":[$rows]}" >"$out/bench.json"
