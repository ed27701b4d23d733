# Sourced by the device scripts that run the kit `gpu_check.sh --stage` carried (.carry/gpu): sets
# repo, stage (.carry/gpu), bin (its binaries) and out ($OUT, else the caller's default_out), and
# puts NVRTC and the carried libraries on LD_LIBRARY_PATH.
repo=$(cd "$(dirname "${BASH_SOURCE[1]}")/../.." && pwd)
stage=$repo/.carry/gpu
bin=$stage/bin
out=${OUT:-$default_out}
mkdir -p "$out"
nvrtc_dir=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/*/lib/libnvrtc.so.13 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH=${nvrtc_dir:-/usr/local/cuda/lib64}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$stage/lib
