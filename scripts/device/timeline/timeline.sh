#!/usr/bin/env bash
# Run ON A GPU MACHINE: builds libtimeline.so (timeline.c against the machine's CUPTI) into
# /tmp/timeline, then runs COMMAND... under it, writing the raw timeline to $TIMELINE_OUT
# (default /tmp/timeline.txt). Analyse it with timeline.py.
#   bash scripts/device/timeline/timeline.sh COMMAND...
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
inc=$(dirname "$(find "$cuda"/ -name cupti_activity.h 2>/dev/null | head -1)")
lib=$(dirname "$(find "$cuda"/ -name 'libcupti.so*' 2>/dev/null | head -1)")
# The newest record struct of each kind this CUPTI declares.
newest() { grep -ohE "\} *$1[0-9]+;" "$inc"/cupti_activity*.h | grep -oE "$1[0-9]+" | sort -V | tail -1; }
mkdir -p /tmp/timeline
if [ ! -f /tmp/timeline/libtimeline.so ]; then
  gcc -O2 -shared -fPIC -I"$inc" -I"$cuda/include" \
    -DKERNEL_T="$(newest CUpti_ActivityKernel)" -DMEMCPY_T="$(newest CUpti_ActivityMemcpy)" \
    -DMEMSET_T="$(newest CUpti_ActivityMemset)" -DPTOP_T="$(newest CUpti_ActivityMemcpyPtoP)" \
    "$here/timeline.c" -o /tmp/timeline/libtimeline.so -L"$lib" -lcupti -Wl,-rpath,"$lib"
fi
export TIMELINE_OUT=${TIMELINE_OUT:-/tmp/timeline.txt}
CUDA_INJECTION64_PATH=/tmp/timeline/libtimeline.so "$@"
