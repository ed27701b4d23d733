# Sourced by the device scripts that run the kit `gpu_check.sh --stage` carried (.carry/gpu): sets
# repo, stage (.carry/gpu), bin (its binaries) and out ($OUT, else the caller's default_out), puts
# NVRTC, cuBLASLt and the carried libraries on LD_LIBRARY_PATH, and links the CPU machine's absolute paths
# the test binaries carry (sources and test data under /work/main, the kplan CLI under the build
# folder the kit was staged from, which --stage records).
repo=$(cd "$(dirname "${BASH_SOURCE[1]}")/../.." && pwd)
stage=$repo/.carry/gpu
bin=$stage/bin
out=${OUT:-$default_out}
mkdir -p "$out"
# libnvrtc.so.13 from the CUDA toolkit there, else from PyTorch's nvidia-cuda-nvrtc wheel.
nvrtc_dir=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/*/lib/libnvrtc.so.13 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$nvrtc_dir" ] && [ "$nvrtc_dir" != . ] || nvrtc_dir=$(dirname "$(find / -name 'libnvrtc.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)")
# libcublasLt.so.13 (a plan's long-step matmuls call it) likewise: the toolkit's, else the nvidia-cublas wheel's.
cublas_dir=$(dirname "$(ls /usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/targets/*/lib/libcublasLt.so.13 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$cublas_dir" ] && [ "$cublas_dir" != . ] || cublas_dir=$(dirname "$(find / -name 'libcublasLt.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$nvrtc_dir:$cublas_dir:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$stage/lib
build=${KPLAN_BUILD_DIR:-$(cat "$stage/build_dir" 2>/dev/null || echo /work/build-plan)}
mkdir -p /work && { [ -e /work/main ] || ln -s "$repo" /work/main; }
[ -e "$build/bin/kplan" ] || { mkdir -p "$build/bin" && ln -s "$bin/kplan" "$build/bin/kplan"; }
