#!/usr/bin/env bash
# Run ON THE GPU MACHINE after scripts/device/prepare here: how long the matmul example's
# sequential reference check (plain host code after the launch) takes after a GPU run, with
# and without page-locked buffers, against the host-only run (issue: host code must not get
# slower). Whole-program seconds with the check minus without it, median of 3; then, during
# one check on the GPU, every thread's CPU use and placement (is something of ours or the
# driver's still running?), and the same runs pinned to one core.
set -u
n=${1:-1024}
secs() { local s=$(date +%s.%N); env "$@" carry/bin/matmul $n >/dev/null 2>&1; python3 -c "print(round($(date +%s.%N) - $s, 3))"; }
for mode in "HPVM_MGPU_DEVICES=cpu" "HPVM_MGPU_DEVICES=cuda" "HPVM_MGPU_DEVICES=cuda HPVM_MGPU_PIN=off" "HPVM_MGPU_DEVICES=cuda:1"; do
  with=(); without=()
  for i in 1 2 3; do
    with+=("$(secs $mode)"); without+=("$(secs $mode HPVM_EXAMPLE_SKIP_CHECK=1)")
  done
  echo "$mode: with check ${with[*]} s; without ${without[*]} s"
done
pinned() { local s=$(date +%s.%N); env "$@" taskset -c 3 carry/bin/matmul $n >/dev/null 2>&1; python3 -c "print(round($(date +%s.%N) - $s, 3))"; }
for mode in "HPVM_MGPU_DEVICES=cpu" "HPVM_MGPU_DEVICES=cuda"; do
  with=(); without=()
  for i in 1 2 3; do
    with+=("$(pinned $mode)"); without+=("$(pinned $mode HPVM_EXAMPLE_SKIP_CHECK=1)")
  done
  echo "all threads on core 3, $mode: with check ${with[*]} s; without ${without[*]} s"
done
HPVM_MGPU_DEVICES=cuda carry/bin/matmul $n >/dev/null 2>&1 &
pid=$!
sleep 2
echo "threads of a GPU run during its check (tid, cpu, %cpu, state, name):"
ps -L -o tid=,psr=,pcpu=,stat=,comm= -p $pid | sort -k3 -n -r | head -12
grep -E "Cpus_allowed_list|voluntary" /proc/$pid/status
wait $pid
grep -i AnonHugePages /proc/meminfo; cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null
cat /proc/sys/kernel/numa_balancing 2>/dev/null; lscpu | grep -E "NUMA|Model name|^CPU\(s\)"
