#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/test-programs.sh [LIST]     (default scripts/device/test-programs.list)
# Each CUDA test program of LIST (NAME|ARGS|CHECKSUM; built as carry/bin/NAME_cu) on one GPU,
# then on one GPU cut into 3 partitions: every run must exit 0, print PASS and the checksum
# LIST holds (a change of the runtime's paths must not change a bit). Writes
# $OUT/test-programs.jsonl, one row per run, and exits 1 on any difference.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
list=${1:-scripts/device/test-programs.list}
bad=0
while IFS='|' read -r name args want; do
  case $name in '#'* | '') continue ;; esac
  for mode in one parts3; do
    env=(HPVM_MGPU_DEVICES=cuda:1)
    [ "$mode" = parts3 ] && env+=(HPVM_MGPU_PARTITIONS=3)
    start=$(date +%s%N)
    # shellcheck disable=SC2086 # ARGS are words
    bin=carry/bin/${name}_cu
    [ -x carry/bin/test_${name}_cu ] && bin=carry/bin/test_${name}_cu
    log=$(env "${env[@]}" timeout 120 "$bin" $args 2>&1)
    rc=$?
    wall=$(python3 -c "import sys; print(round((int(sys.argv[2]) - int(sys.argv[1])) / 1e9, 3))" "$start" "$(date +%s%N)")
    got=$(echo "$log" | grep -m1 '^checksum' | awk '{print $2}')
    pass=false
    echo "$log" | grep -q PASS && pass=true
    ok=false
    [ $rc = 0 ] && [ $pass = true ] && [ "$got" = "$want" ] && ok=true
    [ $ok = true ] || bad=1
    tail=$(echo "$log" | tail -3 | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().splitlines()))')
    echo "{\"program\":\"$name\",\"args\":\"$args\",\"mode\":\"$mode\",\"rc\":$rc,\"pass\":$pass,\"checksum\":\"$got\",\"expected\":\"$want\",\"same\":$ok,\"wall_s\":$wall,\"tail\":$tail}" >> "$out/test-programs.jsonl"
    echo "$name $mode rc=$rc pass=$pass same=$ok ${wall}s"
  done
done < "$list"
exit $bad
