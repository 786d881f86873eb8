#!/usr/bin/env bash
# Run ON THE GPU MACHINE after scripts/device/prepare here: which threads use the CPU while
# the matmul example runs its sequential reference check, after a GPU run and after a
# host-only one (looking for something left spinning beside the user's code).
set -u
n=${1:-1024}
lscpu | grep -E "^Thread|^Core|^Socket|^CPU\(s\)|Model name"
for mode in cuda cpu; do
  HPVM_MGPU_DEVICES=$mode carry/bin/matmul $n >/dev/null 2>&1 &
  pid=$!
  sleep 2.5
  echo "== HPVM_MGPU_DEVICES=$mode, 2.5 s in: threads by CPU use (tid, cpu, %cpu, state, name)"
  ps -L -o tid=,psr=,pcpu=,stat=,comm= -p $pid | sort -k3 -n -r | head -8
  echo "threads: $(ps -L -p $pid --no-headers | wc -l)"
  top -b -H -n 1 -d 0.5 -p $pid | sed -n '7,12p'
  wait $pid
done
