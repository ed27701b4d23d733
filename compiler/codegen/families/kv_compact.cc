#include "compiler/codegen/families/kv_compact.h"

namespace kplan::codegen::kv_compact {
namespace {

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one thread per column; the rows are walked in order
  d.grid = {ceil_div(kernel_param(k, "C") + kernel_param(k, "R"), kernel_param(k, "THREADS")), 1, 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "kv_compact",
      .header = "kv_cache.cuh",
      .function = "kp::kv_compact",
      .params = {dim_param("C", "c"), dim_param("R", "r"), dtype_param("KV_DT", "kv"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::kv_compact

namespace kplan::codegen {

KernelSource kv_compact_kernel(int64_t kv_lora, int64_t rope, ElemType kv, std::string_view arch) {
  return instantiate(kv_compact::family(), {{"C", kv_lora}, {"R", rope}, {"KV_DT", dtype_code(kv)}}, arch);
}

}  // namespace kplan::codegen
