#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/programs.sh [GPUS]          (default: every visible GPU)
# The test programs (tests/programs/: run-time blocks, clamps, scatters through an index
# buffer, host writes between launches...) at their largest test sizes, on 1 GPU, on GPUS GPUs,
# and on GPUS GPUs with 3 partitions each: every run must print PASS with the 1-GPU checksum.
# Then, when carry/parboil/ holds Parboil executables and inputs (built outside the repository),
# each on 1 and GPUS GPUs, outputs compared byte for byte. Writes $OUT/programs.json and
# $OUT/programs.txt; exits 1 on any mismatch.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
g=${1:-$(nvidia-smi -L | wc -l)}
declare -A args=([mesh]="5003" [mathfns]="1000003" [transpose]="130 70" [mixed]="3000 10" [helpers]="1000" [volume]="17 5 40"
  [heat3d]="20 13 17 4 3 2 3" [threshold]="5000" [hostwrites]="5000 3" [sparsewrites]="3000000 5 store" [jds]="20000 64 3"
  [blur]="130 70 16 5 3" [jacobi1d]="1003 50 5" [gemm_nt]="96 120 16 16 8"
  [conv]="1000 700 3" [gridstride]="100003 64 7" [rownorm]="100000 37"
  [radius]="1000 700 4 256" [unsigned]="8000 1000 32 8" [chain]="20000000 256 4"
  [rowptr]="4000 3000" [boxblur]="4000 3000 32 8 3"
  [escape]="4000 3000 256" [planes]="3000 2000" [lattice]="200" [kernels_cu]="1000003" [structs_cu]="3000000" [steps_cu]="1000000 50" [streams_cu]="3000001")
# The settings of a mode, into the array `env`: 1 GPU, every GPU, every GPU in 3 parts each.
mode_env() {
  case $1 in
    one) env=(HPVM_MGPU_DEVICES=cuda:1) ;;
    many) env=(HPVM_MGPU_DEVICES=cuda:$g) ;;
    parts3) env=(HPVM_MGPU_DEVICES=cuda:$g HPVM_MGPU_PARTITIONS=3) ;;
  esac
}
bad=0
rows=""
sep=""
for name in ${PROGRAMS:-${!args[@]}}; do
  ref=""
  for mode in one many parts3; do
    mode_env $mode
    log="$out/logs/$name.$mode.log"
    env "${env[@]}" HPVM_MGPU_STATS=1 timeout 120 carry/bin/$name ${args[$name]} >"$log" 2>&1
    rc=$?
    sum=$(grep '^checksum ' "$log" | cut -d' ' -f2- | tr '\n' ' ' | sed 's/ $//')
    verdict=$(grep -o 'PASS\|FAIL' "$log" | head -1)
    split=$(grep -o 'partitioned (up to [0-9]* devices)' "$log" | grep -o '[0-9]*' | sort -n | tail -1)
    [ $mode = one ] && ref=$sum
    ok=yes
    { [ $rc = 0 ] && [ "${verdict:-none}" = PASS ] && [ "$sum" = "$ref" ]; } || { ok=NO; bad=1; }
    echo "$(printf '%-11s %-7s rc=%-3s %-4s devices-used=%-2s %s %s' "$name" "$mode" "$rc" "${verdict:-none}" "${split:-0}" "$sum" "$ok")" | tee -a "$out/programs.txt"
    rows+="$sep{\"program\":\"$name\",\"args\":\"${args[$name]}\",\"mode\":\"$mode\",\"env\":\"${env[*]}\",\"rc\":$rc,\"verdict\":\"${verdict:-none}\",\"checksum\":\"$sum\",\"max_devices_used\":${split:-0},\"matches_one_gpu\":\"$ok\"}"
    sep=","
  done
done
# Parboil programs carried with their inputs: carry/parboil/NAME/{NAME,args}; args is the
# command line, with OUTPUT where the output file goes. The same three modes; outputs compared
# byte for byte with the 1-GPU one; statistics kept as JSON (packed into $OUT/logs.tgz).
for dir in carry/parboil/*/; do
  [ -d "$dir" ] || continue
  name=$(basename "$dir")
  for mode in one many parts3; do
    mode_env $mode
    cl=$(sed "s|OUTPUT|$out/$name.$mode.out|" "$dir/args")
    stats="$out/logs/parboil-$name.$mode.stats.json"
    ( cd "$dir" && /usr/bin/time -f "%e" env "${env[@]}" HPVM_MGPU_STATS="$stats" timeout 300 ./$name $cl ) >"$out/logs/parboil-$name.$mode.log" 2>&1
    rc=$?
    if cmp -s "$out/$name.one.out" "$out/$name.$mode.out"; then same=yes; else same=NO; bad=1; fi
    wall=$(tail -1 "$out/logs/parboil-$name.$mode.log")
    # Per node: launches split, GPU kernels and the runtime's own planning (ms).
    summary=$(python3 - "$stats" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
print("; ".join(
    f'{n["node"]}: {n["partitioned_launches"]}/{n["unit_launches"]} split, kernels {n["gpu_ms_kernels"]:.1f} ms, '
    f'intervals {n["ms_intervals"]:.1f} ms, copy planning {n["ms_copy_planning"]:.1f} ms, '
    f'host->dev {n["bytes_host_to_device"]} B, dev->dev {n["bytes_device_to_device"]} B'
    for n in r["nodes"] if n["unit_launches"]))
PY
)
    echo "parboil $name $mode: rc=$rc wall ${wall}s identical to 1 GPU: $same; $summary" | tee -a "$out/programs.txt"
    rows+="$sep{\"program\":\"parboil $name\",\"args\":\"$(cat "$dir/args")\",\"mode\":\"$mode\",\"env\":\"${env[*]}\",\"rc\":$rc,\"wall_s\":\"$wall\",\"identical_to_one_gpu\":\"$same\",\"summary\":\"$summary\"}"
    sep=","
  done
  rm -f "$out/$name.many.out" "$out/$name.parts3.out"
done
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "{\"device\":\"$g x $gpu\",\"commit\":\"$(cat carry/commit 2>/dev/null)\",\"command\":\"bash scripts/device/programs.sh $g\",\"runs\":[$rows]}" >"$out/programs.json"
exit $bad
