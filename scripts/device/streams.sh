#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool): the check that program lanes (HPVM_MGPU_STREAMS=lanes,
# runtime/src/devices/inflight.rs) keep every result and run streams at once, before they
# become the default. Prepare here:
#   for n in $(grep -v '^#' scripts/device/test-programs.list | cut -d'|' -f1 | sort -u); do
#     target/release/hpvm-mgpu build -O3 --gpu-arch sm_90 tests/cuda/$n.cu -o carry/bin/${n}_cu; done
#     (test_${n}_cu where bench/cuda/$n.cu exists; strip them), then
#   tar cf - -C carry bin | xz -T2 --lzma2=preset=6,dict=256MiB >carry/gpu.txz
#   CARRY=$PWD/carry/cs scripts/cuda-samples-build SAMPLES OUT.jsonl 1 0 none   (SAMPLES: a tree
#     of cuda-samples that use streams: simpleHyperQ, simpleMultiCopy, simpleStreams, asyncAPI,
#     simpleCallback, streamOrderedAllocation, StreamPriorities, with Common/)
#   tar cf - -C carry cs | xz -T2 --lzma2=preset=6,dict=256MiB >carry/cs.txz
# and carry ["carry/gpu.txz", "carry/cs.txz"]:
#   bash scripts/device/streams.sh
# Writes to $OUT: lanes_ab.log (tests/cuda/concurrent_streams.cu at 32 streams, lanes against
# one stream: checksums must agree, the spin part's time shows the overlap), test-programs.jsonl
# (every test program with lanes on: checksums as listed), cs_ab.log (each sample with
# nvcc's build, lanes and one stream: verdicts and wall times).
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
tar xJf carry/gpu.txz -C carry
tar xJf carry/cs.txz -C carry
nvidia-smi -L >"$out/smi.txt" 2>&1
root=$PWD/carry/cs
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$nvcc" ]; then
  for dir in "$root"/*/; do
    [ -f "$dir/sources" ] || continue
    (cd "$root" && timeout 200 "$nvcc" $(cat "$dir/flags") $(tr '\n' ' ' <"$dir/sources") -o "$dir/nvcc_app" >"$dir/nvcc.log" 2>&1) &
  done
fi
carry/bin/kernels_cu 3001 >/dev/null 2>&1
for i in 1 2 3 4 5; do
  for m in lanes one; do
    echo "$m $(HPVM_MGPU_STREAMS=$m HPVM_MGPU_DEVICES=cuda:1 timeout 60 carry/bin/concurrent_streams_cu 65536 32 40 2>&1 |
      grep -E 'spin:|checksum|FAIL|error' | tr '\n' ' ')"
  done
done >"$out/lanes_ab.log" 2>&1
HPVM_MGPU_STREAMS=lanes OUT=$out bash scripts/device/test-programs.sh >"$out/test-programs.log" 2>&1
echo "test programs: exit $?" >>"$out/test-programs.log"
wait
for dir in "$root"/*/; do
  key=$(basename "$dir")
  name=${key//__//}
  [ -x "$dir/app" ] || continue
  for m in nvcc lanes one; do
    if [ $m = nvcc ]; then
      [ -x "$dir/nvcc_app" ] || continue
      cmd=("$dir/nvcc_app")
    else
      cmd=(env HPVM_MGPU_STREAMS=$m HPVM_MGPU_DEVICES=cuda:1 "$dir/app")
    fi
    for i in 1 2 3; do
      start=$(date +%s.%N)
      text=$(cd "$root/Samples/$name" && timeout 60 "${cmd[@]}" </dev/null 2>&1)
      rc=$?
      wall=$(awk "BEGIN{print $(date +%s.%N) - $start}")
      echo "$name $m run $i rc=$rc wall=$wall :: $(echo "$text" | tail -4 | tr '\n' ' ')"
    done
  done
done >"$out/cs_ab.log" 2>&1
