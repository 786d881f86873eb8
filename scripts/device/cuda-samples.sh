#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after, here,
#   CARRY=carry/cs scripts/cuda-samples-build SAMPLES OUT.jsonl 1 0 none
#   tar cf - -C carry cs | xz --lzma2=preset=6,dict=256MiB >carry/cs.txz     (carry cs.txz):
#   bash scripts/device/cuda-samples.sh "CONFIGS" [NVCC]     e.g. "1 1p3" nvcc
# Each carried NVIDIA cuda-sample, run from its own folder (where it finds its data) with no
# arguments, as its CMake build's tests run it: built by hpvm-mgpu, on each configuration
# (`G`: HPVM_MGPU_DEVICES=cuda:G; `GpP`: every launch cut in P partitions on G GPUs); with NVCC
# also built there by the machine's nvcc from the same sources and flags, and run alike. One
# JSON row per run in $OUT/cuda-samples.jsonl: sample, configuration, exit status (0 passed its
# own check, 2 waived), wall seconds, the output's last lines. CS_RUN_SECONDS (60) bounds a run.
set -u
out=${OUT:-/tmp/out}
configs_in=$1
with_nvcc=${2:-}
tar xJf carry/cs.txz -C carry
root=$PWD/carry/cs
# Libraries the machine lacks, carried with the samples (libomp: scripts/cuda-samples-build).
export LD_LIBRARY_PATH=$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$with_nvcc" ] && [ -n "$nvcc" ]; then
  for dir in "$root"/*/; do
    [ -f "$dir/sources" ] || continue
    echo "cd $root && timeout 300 $nvcc $(cat "$dir/flags") $(tr '\n' ' ' <"$dir/sources") -o $dir/nvcc_app >$dir/nvcc.log 2>&1"
  done | xargs -P "$(nproc)" -I{} sh -c '{}'
fi
for dir in "$root"/*/; do
  [ -x "$dir/app" ] || continue
  key=$(basename "$dir")
  name=${key//__//}
  configs=""
  [ -x "$dir/nvcc_app" ] && configs="nvcc"
  for c in $configs_in; do configs="$configs hpvm:$c"; done
  # An earlier build's executable (`app.old`, put there by hand to compare), on one GPU.
  [ -x "$dir/app.old" ] && configs="$configs old"
  for config in $configs; do
    case $config in
      nvcc) cmd=("$dir/nvcc_app") ;;
      old) cmd=(env HPVM_MGPU_DEVICES=cuda:1 "$dir/app.old") ;;
      hpvm:*p*) g=${config#hpvm:}; cmd=(env HPVM_MGPU_DEVICES=cuda:${g%p*} HPVM_MGPU_PARTITIONS=${g#*p} HPVM_MGPU_PARTITION=always "$dir/app") ;;
      *) cmd=(env HPVM_MGPU_DEVICES=cuda:${config#hpvm:} "$dir/app") ;;
    esac
    start=$(date +%s.%N)
    text=$(cd "$root/Samples/$name" && timeout "${CS_RUN_SECONDS:-60}" "${cmd[@]}" </dev/null 2>&1)
    rc=$?
    wall=$(awk "BEGIN{print $(date +%s.%N) - $start}")
    python3 -c 'import json,sys; print(json.dumps({"sample":sys.argv[1],"config":sys.argv[2],"rc":int(sys.argv[3]),"wall_s":float(sys.argv[4]),"tail":sys.argv[5].splitlines()[-4:]}))' \
      "$name" "$config" "$rc" "$wall" "$text" >>"$out/cuda-samples.jsonl"
  done
done
