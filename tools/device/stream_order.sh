#!/usr/bin/env bash
# Builds and runs tools/device/stream_order.cu on the GPU machine (its CUDA toolkit's nvcc): GB/s of
# the same bytes read in the int4_frag experts' strip order, step-interleaved and linearly. Prints a
# table; writes nothing else. Usage (device tool): bash tools/device/stream_order.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
"$nvcc" -O3 -std=c++17 -arch=sm_"$arch" -o /tmp/stream_order "$repo/tools/device/stream_order.cu"
/tmp/stream_order
