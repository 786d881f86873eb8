#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool) after scripts/device/prepare here, with the machine's own
# OpenMPI (`mpirun`; the GPU image has OpenMPI 4.1, whose libmpi.so.40 the plugin
# carry/bin/libhpvm_mpi.so, built here against Debian's 4.1, loads):
#   bash scripts/device/ranks.sh RANKS [TIMED...]
# Every rank takes one GPU (CUDA_VISIBLE_DEVICES = its local rank modulo the GPUs; on a
# one-GPU machine all ranks share it). 1. Every example and test program on RANKS ranks
# prints, on each rank, what one process on one GPU prints (timing lines aside). 2. TIMED
# programs ("name|args"), one process against RANKS ranks, 3 runs each, with each rank's
# exchange statistics (bytes and time crossing ranks). Writes $OUT/ranks.json and
# $OUT/ranks.txt; exits 1 on any mismatch.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/logs"
ranks=${1:-2}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gpus=$(nvidia-smi -L | wc -l)
# One GPU per rank, by local rank.
wrap=$(mktemp)
cat >"$wrap" <<EOF
#!/usr/bin/env bash
export CUDA_VISIBLE_DEVICES=\$(( \${OMPI_COMM_WORLD_LOCAL_RANK:-0} % $gpus ))
exec "\$@"
EOF
chmod +x "$wrap"
declare -A args=([vecadd]="5000" [matmul]="144" [stencil2d]="64 160 4" [pipeline]="200 90" [sgemm_tiled]="160 48 32"
  [histogram]="1000 13" [nbody]="3000 2" [exchange]="160 3" [mesh]="5003" [transpose]="130 70" [mixed]="3000 10"
  [helpers]="1000" [volume]="17 5 40" [heat3d]="20 13 17 4 3 2 3" [threshold]="5000" [mathfns]="5000"
  [hostwrites]="5000 3" [sparsewrites]="30000 3 none" [jds]="2000 64 3" [blur]="130 70 16 5 3" [rownorm]="300 513"
  [gridstride]="5003 64 3" [conv]="130 70 3" [radius]="130 70 5 64" [jacobi1d]="1003 50 5" [chain]="5000 48 3"
  [unsigned]="130 270 16 5 300" [rowptr]="90 1000" [planes]="40 900" [lattice]="4" [escape]="90 900 64"
  [boxblur]="130 70 16 5 3" [gemm_nt]="96 120 16 16 8" [kernels_cu]="3001" [structs_cu]="3000" [streams_cu]="3001"
  [thesis_matmul]="100" [thesis_stencil]="130 4" [thesis_nbody]="1100 2")
comparable() { grep -v '_ms' "$1" 2>/dev/null; }
bad=0
rows=""
sep=""
for name in ${PROGRAMS:-${!args[@]}}; do
  one="$out/logs/$name.one.log"
  HPVM_MGPU_DEVICES=cuda:1 timeout 120 carry/bin/$name ${args[$name]} </dev/null >"$one" 2>"$one.err"
  rc1=$?
  dir="$out/logs/$name.ranks"
  rm -rf "$dir"
  timeout 300 mpirun --oversubscribe -n "$ranks" -x HPVM_MGPU_DEVICES=cuda:1 --output-filename "$dir" \
    "$wrap" carry/bin/$name ${args[$name]} </dev/null >"$out/logs/$name.mpirun.log" 2>&1
  rc=$?
  same=1
  for r in $(seq 0 $((ranks - 1))); do
    f=$(ls -d "$dir"/*/rank.$r 2>/dev/null | head -1)/stdout
    if [ "$(comparable "$f")" != "$(comparable "$one")" ]; then same=0; fi
  done
  verdict=ok
  if [ $rc1 != 0 ] || [ $rc != 0 ] || [ $same != 1 ] || ! grep -q PASS "$one"; then verdict=MISMATCH; bad=1; fi
  printf '%-16s one-process rc %s, %s ranks rc %s: %s\n' "$name" "$rc1" "$ranks" "$rc" "$verdict" | tee -a "$out/ranks.txt"
  rows+="$sep{\"program\":\"$name\",\"args\":\"${args[$name]}\",\"one_rc\":$rc1,\"ranks_rc\":$rc,\"identical\":$same}"
  sep=","
done
timed=""
tsep=""
for t in "$@"; do
  name=${t%%|*}
  a=${t#*|}
  for how in one ranks; do
    for rep in 1 2 3; do
      st="$out/logs/$name.$how.$rep.json"
      rm -f "$st" "$st".rank*
      start=$(date +%s.%N)
      if [ $how = one ]; then
        HPVM_MGPU_DEVICES=cuda:1 HPVM_MGPU_STATS="$st" HPVM_EXAMPLE_SKIP_CHECK=1 carry/bin/$name $a </dev/null \
          >"$out/logs/$name.$how.$rep.log" 2>&1
      else
        mpirun --oversubscribe -n "$ranks" -x HPVM_MGPU_DEVICES=cuda:1 -x HPVM_MGPU_STATS="$st" \
          -x HPVM_EXAMPLE_SKIP_CHECK=1 "$wrap" carry/bin/$name $a </dev/null >"$out/logs/$name.$how.$rep.log" 2>&1
      fi
      rc=$?
      end=$(date +%s.%N)
      line=$(python3 - "$st" "$name" "$a" "$how" "$rep" "$rc" "$start" "$end" "$ranks" <<'EOF'
import json, sys
path, name, a, how, rep, rc, start, end, ranks = sys.argv[1:]
try:
    s = json.load(open(path))
except Exception:
    s = {}
n = [x for x in s.get("nodes", []) if x.get("unit_launches")]
k = s.get("ranks") or {}
ms_ex = k.get("ms_exchanging", 0.0)
moved = k.get("bytes_sent", 0) + k.get("bytes_received", 0)
print(json.dumps({
    "program": name, "args": a, "how": how if how == "one" else f"{ranks} ranks", "repeat": int(rep),
    "rc": int(rc), "wall_s": round(float(end) - float(start), 4),
    "gpu_ms_kernels": round(sum(x.get("gpu_ms_kernels", 0) for x in n), 3),
    "ms_session": s.get("ms_session"), "ms_device_setup": s.get("ms_device_setup"),
    "rank0_exchanges": k.get("exchanges"), "rank0_bytes_sent": k.get("bytes_sent"),
    "rank0_bytes_received": k.get("bytes_received"), "rank0_ms_exchanging": ms_ex,
    "rank0_exchange_GB_per_s": round(moved / ms_ex / 1e6, 3) if ms_ex else None,
    "rank0_agreements": k.get("agreements"), "rank0_ms_agreeing": k.get("ms_agreeing"),
}))
EOF
)
      echo "$line" | tee -a "$out/ranks.txt"
      timed+="$tsep$line"
      tsep=","
    done
  done
done
echo "{\"device\":\"$(nvidia-smi -L | head -1 | sed 's/ (UUID.*//') x $gpus\",\"commit\":\"$(cat carry/commit 2>/dev/null)\",\"command\":\"bash scripts/device/ranks.sh $ranks $*\",\"mpirun\":\"$(mpirun --version | head -1)\",\"programs\":[${rows}],\"timed\":[${timed}]}" >"$out/ranks.json"
tar czf "$out/ranks-logs.tgz" -C "$out" logs && rm -rf "$out/logs"
exit $bad
