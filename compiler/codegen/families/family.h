#pragma once
// A kernel family: one CUDA C++ template in kernels_templates/ and everything the compiler knows
// about it, in one file under compiler/codegen/families/ — its compile-time constants (template
// parameters, in template order), its typed launch arguments (an `Args` struct, args.h), its
// shape rules and its launch geometry. Tuning constants come from heuristics/<arch>.cc.
//
// A library family (Family::library: a call the runtime makes, cuBLASLt's matmul) has no template:
// its doc block is its families/<name>.h.
//
// Adding a family (say `foo`):
//   1. kernels_templates/foo.cuh: the template, with the doc block every template has (what it
//      computes, template parameters, launch, arguments).
//   2. families/foo.{h,cc}: `foo::Args` (one KPLAN_* field per kernel argument, in the template's
//      order, named as in the template), `foo::family()` (header, device function, ParamSpecs,
//      check, geometry) and the typed constructor `foo_kernel(...)`; add `&foo::family()` to
//      the list in families/registry.cc.
//   3. heuristics/sm90.cc (and sm120.cc where Blackwell wants other values): the entry that
//      chooses its tuning constants.
//   4. tests: a row in tests/unit/codegen/compile_families_test.cc (NVRTC for sm_90 and sm_120)
//      and, once the op is lowered, its case in the backend-ops table.
// Nothing else is keyed by the family's name: instantiate.cc, launch_geometry.cc and the
// lowering stages reach the family through its Family object.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/codegen/families/args.h"
#include "compiler/codegen/kernel_instance.h"

namespace kplan::codegen {

// Values of a family's template parameters by name (dims, dtype codes, flags, tile sizes).
using ParamValues = std::map<std::string, int64_t>;

struct ParamSpec {
  std::string name;        // template parameter name, e.g. "K", "X_DT"
  std::string tag;         // short prefix in readable ids, e.g. "k" -> "k256"
  bool is_dtype = false;   // value is an ElemType code, printed as "f32" / "bf16"
  bool is_tuning = false;  // chosen by heuristics/<arch>.cc unless given
  // Not a template argument: the entry's __launch_bounds__ minimum of resident blocks an SM (0:
  // none given), which caps ptxas's registers a thread at 64K / (threads * it).
  bool min_blocks = false;
  // Named in the readable id only when nonzero (a parameter added after ids were pinned by goldens
  // and caches: the instances without it keep their ids).
  bool id_when_nonzero = false;
};
inline ParamSpec dim_param(const char* name, const char* tag) { return {name, tag, false, false}; }
inline ParamSpec dtype_param(const char* name, const char* tag) { return {name, tag, true, false}; }
inline ParamSpec tuning_param(const char* name, const char* tag) { return {name, tag, false, true}; }
inline ParamSpec min_blocks_param(const char* name, const char* tag) { return {name, tag, false, true, true, true}; }
inline ParamSpec optional_tuning_param(const char* name, const char* tag) { return {name, tag, false, true, false, true}; }
inline ParamSpec optional_dim_param(const char* name, const char* tag) { return {name, tag, false, false, false, true}; }

// What a launch's grid depends on beyond the instance's constants.
struct LaunchShape {
  int64_t rows = 0;   // tokens of the step for most families; rows for rms_norm / copy_rows /
                      // argmax / topk; queries for gqa_attention; ignored by kv_compact
  int64_t batch = 1;  // heads of a batched matmul; context splits of mla_split_partial
};

// Grid, block, shared memory and cluster of one launch. Hopper / Blackwell kernels may ask for a
// grid sized by the device ("persistent" kernels: grid.x = grid_x_per_sm * the SM count of the
// device the plan is loaded on, resolved by runtime/gpu/launch_resolve.h) and for thread-block
// clusters (cluster dims; launched with cuLaunchKernelEx).
struct LaunchDims {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t smem_bytes = 0;                  // dynamic shared memory
  std::array<uint32_t, 3> cluster{1, 1, 1};  // {1, 1, 1}: no cluster
  uint32_t grid_x_per_sm = 0;               // > 0: grid.x is this many blocks per SM, at load
};

enum class BlockParam : uint8_t { Threads, Warps };  // THREADS threads, or WARPS * 32

struct Family {
  std::string name;      // "matmul"
  std::string header{};    // "matmul.cuh" (a library family: none)
  std::string function{};  // "kp::matmul" (a library family: none)
  // Optional: a device function with the same template and call arguments that the entry runs
  // before kp::grid_dependency_begin, i.e. while the kernel before it may still run (PDL). It may
  // read only what no kernel of a step writes (the plan's weights) and write nothing -- but for
  // an address it only asks L2 for (a hint: the MoE experts' GPF prologue guesses its expert from
  // the ids as they stand, a stale guess costing a useless fetch, never a wrong result).
  std::string prologue{};  // "kp::matmul_prefetch"
  // The template calls kp::grid_dependency_begin itself (where it first reads what the launch
  // before it writes), so the entry does not: what comes before it may read only the plan's
  // weights and write nothing, as a prologue (mla_split_combine_uv loads its W_UV rows there).
  bool waits_itself = false;
  std::vector<ParamSpec> params;     // template order
  std::vector<KernelArg> signature;  // signature_of<Args>()
  BlockParam block = BlockParam::Threads;
  // Rules beyond "dims are non-negative ints, dtypes are codes" (throw through require()).
  void (*check)(const ParamValues&) = nullptr;
  LaunchDims (*geometry)(const KernelSource&, const LaunchShape&) = nullptr;
  // A library call instead of a template ("cublaslt": families/cublaslt_matmul.h): no header,
  // function, block or NVRTC; the plan records the call's constants and arguments, the runtime
  // calls the library with them (runtime/gpu/library_matmul.h).
  std::string library{};
};

// Every family (families/registry.cc), in a stable order.
const std::vector<const Family*>& all_families();
// Throws kplan::Error naming the family when there is none of that name.
const Family& find_family(std::string_view name);

// Throws kplan::Error "codegen: <family>: <what>" unless ok.
void require(bool ok, std::string_view family, const std::string& what);
// A compile-time constant of an instance; throws kplan::Error when the family has no such one.
int64_t kernel_param(const KernelSource& kernel, const std::string& name);

// Geometry helpers.
uint32_t ceil_div(int64_t a, int64_t b);
LaunchDims block_of(const KernelSource& k);  // grid 1, the instance's block
LaunchDims one_block_per_row(const KernelSource& k, const LaunchShape& s);

// Instantiates `family` for `arch` (tuning from heuristics for that arch unless given).
KernelSource instantiate(const Family& family, const ParamValues& params, std::string_view arch);

// The arch a kernel is tuned for when the caller names none.
inline constexpr std::string_view kDefaultArch = "sm_90";

inline int64_t dtype_code(ElemType t) { return static_cast<int64_t>(t); }

}  // namespace kplan::codegen
