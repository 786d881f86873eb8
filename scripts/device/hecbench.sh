#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/hecbench-carry here (carry hec.txz):
#   bash scripts/device/hecbench.sh "GPU COUNTS" [NVCC]      e.g. "1 2" nvcc; a count `GpP`
#   (`1p3`) runs on G GPUs with every launch cut in P partitions
# Each carried HeCBench program with its run target's arguments, from its own folder: built by
# hpvm-mgpu, on each GPU count (HPVM_MGPU_DEVICES=cuda:N); with NVCC also built there by the
# machine's nvcc from its sources (`make` with its Makefile) and run alike. One JSON row per
# run in $OUT/hecbench.jsonl: program, configuration, exit status, wall seconds, the output's
# last lines (programs print PASS/FAIL or their results). HEC_BUILD_SECONDS (300) and HEC_RUN_SECONDS
# (60) bound each nvcc build and each run.
set -u
out=${OUT:-/tmp/out}
counts=$1
with_nvcc=${2:-}
tar xJf carry/hec.txz -C carry
# Libraries the machine lacks, carried with the programs (libomp: scripts/hecbench-carry).
export LD_LIBRARY_PATH=$PWD/carry/hec/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
# nvcc's builds first, all at once (each Makefile's own, one program per job): they take
# longer than the runs.
if [ -n "$with_nvcc" ] && [ -n "$nvcc" ]; then
  for dir in carry/hec/*/; do
    [ -f "$dir/args" ] || continue
    name=$(basename "$dir")
    program=$(sed -n 's/^program *= *//p' "$dir/src/Makefile" | head -1)
    echo "cd $dir/src && timeout ${HEC_BUILD_SECONDS:-300} make -B CC=$nvcc NVCC=$nvcc ARCH=sm_90 >/tmp/nvcc-$name.log 2>&1 && cp ${program:-main} ../nvcc_main"
  done | xargs -P "$(nproc)" -I{} sh -c '{}'
fi
for dir in carry/hec/*/; do
  [ -f "$dir/args" ] || continue
  name=$(basename "$dir")
  args=$(cat "$dir/args")
  configs=""
  for g in $counts; do configs="$configs hpvm:$g"; done
  [ -x "$dir/nvcc_main" ] && configs="nvcc $configs"
  # An earlier build's executable (scripts/hecbench-carry's OLD), on one GPU.
  [ -x "$dir/main.old" ] && configs="$configs old"
  for config in $configs; do
    case $config in
      nvcc) cmd=(./nvcc_main) ;;
      old) cmd=(env HPVM_MGPU_DEVICES=cuda:1 ./main.old) ;;
      # `1p3`: one GPU whose launches are cut in 3 partitions, always (the split paths).
      hpvm:*p*) g=${config#hpvm:}; cmd=(env HPVM_MGPU_DEVICES=cuda:${g%p*} HPVM_MGPU_PARTITIONS=${g#*p} HPVM_MGPU_PARTITION=always ./main) ;;
      *) cmd=(env HPVM_MGPU_DEVICES=cuda:${config#hpvm:} ./main) ;;
    esac
    start=$(date +%s.%N)
    text=$(cd "$dir/src" && timeout ${HEC_RUN_SECONDS:-60} "${cmd[@]/#.\//../}" $args 2>&1)
    rc=$?
    wall=$(awk "BEGIN{print $(date +%s.%N) - $start}")
    python3 -c 'import json,sys; print(json.dumps({"program":sys.argv[1],"config":sys.argv[2],"rc":int(sys.argv[3]),"wall_s":float(sys.argv[4]),"tail":sys.argv[5].splitlines()[-4:]}))' \
      "$name" "$config" "$rc" "$wall" "$text" >>"$out/hecbench.jsonl"
  done
done
