#!/usr/bin/env bash
# Run ON A MULTI-GPU MACHINE (device tool) after scripts/device/prepare here:
#   bash scripts/device/scaling.sh "GPU COUNTS" REPEATS CASE...
# e.g. bash scripts/device/scaling.sh "1 2" 3 "matmul 8192" "stencil2d 8192 8192 1000"
# Each case is an example and its arguments; it runs REPEATS times on each GPU count with the
# reference check skipped (HPVM_EXAMPLE_SKIP_CHECK=1) and the statistics as JSON. Writes one
# JSON row per run to $OUT/scaling.jsonl: wall seconds, checksum, and the runtime's
# breakdown summed over nodes (GPU timeline: copies from the host, copies between GPUs,
# kernels; host side: intervals, copy planning, allocation; copies back to the host).
# SCALING_ENV adds settings to every run (e.g. SCALING_ENV=HPVM_MGPU_PIN=on).
set -u
SCALING_ENV=${SCALING_ENV:-}
out=${OUT:-/tmp/out}
mkdir -p "$out"
counts=$1
repeats=$2
shift 2
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
commit=$(cat carry/commit 2>/dev/null)
nvidia-smi topo -m >"$out/topology.txt" 2>&1
for case in "$@"; do
  read -r name args <<<"$case"
  for g in $counts; do
    for r in $(seq 1 "$repeats"); do
      stats=/tmp/stats.$$.json
      rm -f "$stats"
      start=$(date +%s.%N)
      env $SCALING_ENV HPVM_MGPU_DEVICES=cuda:$g HPVM_EXAMPLE_SKIP_CHECK=1 HPVM_MGPU_STATS=$stats timeout 600 carry/bin/$name $args >/tmp/run.$$.log 2>&1
      rc=$?
      end=$(date +%s.%N)
      sum=$(grep -o 'checksum [0-9a-f]*' /tmp/run.$$.log | cut -d' ' -f2 | head -1)
      python3 - "$stats" <<PY >>"$out/scaling.jsonl"
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception:
    s = {"nodes": []}
n = s.get("nodes", [])
tot = lambda k: round(sum(x.get(k, 0) for x in n), 3)
print(json.dumps({
    "device": "$gpu", "commit": "$commit", "bench": "$name", "args": "$args", "gpus": $g, "repeat": $r,
    "command": "$SCALING_ENV HPVM_MGPU_DEVICES=cuda:$g HPVM_EXAMPLE_SKIP_CHECK=1 carry/bin/$name $args",
    "rc": $rc, "checksum": "$sum", "wall_s": round($end - $start, 4),
    "gpu_ms_host_copies": tot("gpu_ms_host_copies"), "gpu_ms_peer_copies": tot("gpu_ms_peer_copies"),
    "gpu_ms_kernels": tot("gpu_ms_kernels"), "ms_intervals": tot("ms_intervals"),
    "ms_copy_planning": tot("ms_copy_planning"), "ms_allocation": tot("ms_allocation"),
    "ms_copies_enqueue": tot("ms_copies"), "ms_partitions_wall": tot("ms_partitions"),
    "ms_to_host": s.get("ms_to_host", 0), "ms_session": s.get("ms_session", 0),
    "ms_device_setup": s.get("ms_device_setup", 0), "bytes": s.get("bytes", []),
    "ms_page_locking": s.get("ms_page_locking", 0), "bytes_page_locked": s.get("bytes_page_locked", 0),
    "launches": sum(x.get("unit_launches", 0) for x in n), "partitioned": sum(x.get("partitioned_launches", 0) for x in n),
    "devices": s.get("devices", ""),
}))
PY
      tail -1 "$out/scaling.jsonl" | cut -c1-400
    done
  done
done
