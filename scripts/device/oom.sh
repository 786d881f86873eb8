#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/oom.sh
# Device out-of-memory on real GPUs: `cuda_probe hog` leaves GPU 0 with LEAVE_MIB (default
# 2048) free, then vecadd with buffers that do not fit runs
#   1. on GPU 0 alone (the whole launch's buffers do not fit), and
#   2. on every GPU, when there are two or more (GPU 0's share does not fit, the others' do).
# Each run must end with status 1 and a message naming the buffer, its size and the GPU, and
# never print PASS or FAIL (no result at all rather than a wrong one). Then, with the hog gone,
# the same command must PASS. Writes $OUT/oom.txt and $OUT/oom.json; exits 1 if a check fails.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
leave=${LEAVE_MIB:-2048}
n=${N:-400000000}
g=$(nvidia-smi -L | wc -l)
bad=0
rows=""
sep=""
check() { # name devices expect(oom|pass)
  local name=$1 devices=$2 expect=$3 log="$out/logs/oom.$1.log"
  env HPVM_MGPU_DEVICES="$devices" timeout 300 carry/bin/vecadd "$n" >"$log" 2>&1
  local rc=$?
  local msg
  msg=$(grep -m1 -i 'out of memory' "$log" | tr -d '"\\' | cut -c1-400)
  local verdict
  verdict=$(grep -o 'PASS\|FAIL' "$log" | head -1)
  local ok=yes
  if [ "$expect" = oom ]; then
    { [ $rc = 1 ] && [ -n "$msg" ] && [ -z "$verdict" ]; } || { ok=NO; bad=1; }
  else
    { [ $rc = 0 ] && [ "$verdict" = PASS ]; } || { ok=NO; bad=1; }
  fi
  echo "$name: devices=$devices rc=$rc verdict=${verdict:-none} expected=$expect ok=$ok :: $msg" | tee -a "$out/oom.txt"
  rows+="$sep{\"case\":\"$name\",\"devices\":\"$devices\",\"n\":$n,\"rc\":$rc,\"verdict\":\"${verdict:-none}\",\"expected\":\"$expect\",\"ok\":\"$ok\",\"message\":\"$msg\"}"
  sep=","
}
CUDA_VISIBLE_DEVICES=0 carry/bin/cuda_probe hog "$leave" 600 >"$out/logs/hog.log" 2>&1 &
hog=$!
for _ in $(seq 120); do grep -q '^hog:' "$out/logs/hog.log" && break; sleep 1; done
cat "$out/logs/hog.log" | tee -a "$out/oom.txt"
check one-gpu cuda:1 oom
[ "$g" -ge 2 ] && check all-gpus "cuda:$g" oom
kill $hog
wait $hog 2>/dev/null
check after-hog "cuda:$g" pass
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "{\"device\":\"$g x $gpu\",\"commit\":\"$(cat carry/commit 2>/dev/null)\",\"command\":\"bash scripts/device/oom.sh\",\"leave_mib\":$leave,\"runs\":[$rows]}" >"$out/oom.json"
exit $bad
