#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool), with carry/bin from scripts/device/prepare (and
# carry/bin/startup_ptx_cu: bench/cuda/startup.cu built with `--gpu-arch sm_80` only, whose
# machine code an H100 cannot run, so the driver compiles its PTX):
#   bash scripts/device/startup.sh "GPU COUNTS" REPEATS [N]
# Start-up cost: bench/cuda/startup.cu (one short kernel) built by the machine's nvcc
# (-arch=sm_90: SASS embedded) and by hpvm-mgpu with machine code (startup_cu) and without
# (startup_ptx_cu), each run REPEATS times with the driver's JIT cache off
# (CUDA_CACHE_DISABLE=1, as on a machine whose cache is empty). Writes one JSON row per run to
# $OUT/startup.jsonl: configuration, wall seconds, the runtime's device setup and module
# loading (from its statistics), exit status.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
counts=$1
repeats=$2
n=${3:-4096}
export CUDA_CACHE_DISABLE=1
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
configs=""
if [ -n "$nvcc" ] && "$nvcc" -O3 -arch=sm_90 -o /tmp/startup_nvcc bench/cuda/startup.cu >"$out/logs/startup.nvcc-build.log" 2>&1; then
  configs="nvcc"
fi
for g in $counts; do configs="$configs sass:$g ptx:$g"; done
for config in $configs; do
  for r in $(seq 1 "$repeats"); do
    log="$out/logs/startup.${config/:/}.$r.log"
    stats="$out/logs/startup.${config/:/}.$r.json"
    case $config in
      nvcc) cmd=(/tmp/startup_nvcc "$n") ;;
      sass:*) cmd=(env HPVM_MGPU_DEVICES=cuda:${config#sass:} HPVM_MGPU_STATS="$stats" carry/bin/startup_cu "$n") ;;
      ptx:*) cmd=(env HPVM_MGPU_DEVICES=cuda:${config#ptx:} HPVM_MGPU_STATS="$stats" carry/bin/startup_ptx_cu "$n") ;;
    esac
    start=$(date +%s.%N)
    timeout 120 "${cmd[@]}" >"$log" 2>&1
    rc=$?
    wall=$(python3 -c "print(round($(date +%s.%N) - $start, 4))")
    extra=$(python3 - "$stats" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    print(',"ms_device_setup":%s,"ms_gpu_module_loading":%s,"modules_sass":%s,"modules_jit":%s' % (
        r["ms_device_setup"], r["ms_gpu_module_loading"], r["gpu_modules_from_sass"], r["gpu_modules_jit_compiled"]))
except Exception:
    print("")
PY
)
    sum=$(grep -o 'checksum [0-9a-f]*' "$log" | cut -d' ' -f2)
    echo "{\"program\":\"startup\",\"n\":$n,\"config\":\"$config\",\"run\":$r,\"warmup\":$([ "$r" = 1 ] && echo true || echo false),\"rc\":$rc,\"wall_s\":$wall,\"checksum\":\"$sum\"$extra}" >>"$out/startup.jsonl"
    printf '%-8s run %d rc=%d wall %7.3fs %s %s\n' "$config" "$r" "$rc" "$wall" "$sum" "$extra"
  done
done
