#pragma once
// One compiled kernel: a kernel family's template (kernels_templates/<header>.cuh) specialised
// with compile-time constants, wrapped in a generated extern "C" entry and compiled by NVRTC for
// one GPU arch. This is what the plan stores per kernel and what the runtime loads with
// cuModuleLoadData + cuModuleGetFunction(entry).
#include <cstdint>
#include <string>
#include <vector>

namespace kplan::codegen {

// Kind of one kernel argument, in launch order. The runtime packs each argument as:
//   DevicePtr -> CUdeviceptr (8 bytes), I32 -> int32_t, F32 -> float, TensorMap -> a CUtensorMap
//   (128 bytes, by value: `const __grid_constant__ CUtensorMap`) encoded at load for TMA.
enum class ArgKind : uint8_t { DevicePtr, I32, F32, TensorMap };
const char* arg_kind_name(ArgKind k);  // "ptr", "i32", "f32", "tensor_map"

struct KernelArg {
  std::string name;  // as in the template's doc block, e.g. "x", "n_rows", "eps"
  ArgKind kind = ArgKind::DevicePtr;
  bool operator==(const KernelArg&) const = default;
};

// A compile-time constant of the instance (dims, dtype codes, flags, tile sizes). The names and
// order are the family's template parameters; all are recorded in the plan.
struct KernelParam {
  std::string name;
  int64_t value = 0;
};

// Activation / cache element type codes used as template parameters (kernels_templates/common.cuh
// defines the same numbers).
enum class ElemType : int64_t { F32 = 0, BF16 = 1 };

// The generated source of one instance before compilation (arch independent).
struct KernelSource {
  std::string family;                // e.g. "rms_norm"
  std::string id;                    // readable, arch-free: "rms_norm_d256_xbf16_ybf16"
  std::string entry;                 // extern "C" symbol: "kplan_" + id
  std::string header;                // template header, e.g. "rms_norm.cuh"
  std::vector<KernelParam> params;   // compile-time constants, template order
  std::vector<KernelArg> signature;  // launch arguments, in order
  int block_threads = 0;             // threads per block this instance is compiled for
  std::string source;                // generated translation unit (a few lines)
  std::string library;               // a library family's call (Family::library): no source, no cubin
};

// A source compiled for one arch.
struct KernelInstance {
  KernelSource src;
  std::string arch;                  // "sm_90", "sm_120"
  std::string id;                    // src.id + "_" + arch without "_": "rms_norm_d256_..._sm90"
  std::vector<std::string> options;  // NVRTC options used (arch, std, include names, ...)
  std::vector<uint8_t> cubin;        // ELF bytes from nvrtcGetCUBIN
  std::string cache_key;             // 16 hex digits (XXH3-64) of everything the cubin depends on
  bool cache_hit = false;            // true when the cubin came from the disk cache

  const std::string& entry() const { return src.entry; }
  const std::string& family() const { return src.family; }
};

}  // namespace kplan::codegen
