#include "compiler/codegen/families/mla_attention.h"

namespace kplan::codegen::mla_attention {
namespace {

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one block per (head, token)
  d.grid = {static_cast<uint32_t>(kernel_param(k, "HEADS")), static_cast<uint32_t>(s.rows), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "mla_attention",
      .header = "mla_attention.cuh",
      .function = "kp::mla_attention",
      .params = {dim_param("HEADS", "h"), dim_param("C", "c"), dim_param("R", "r"), dtype_param("Q_DT", "q"), dtype_param("KV_DT", "kv"), dtype_param("O_DT", "o"), tuning_param("WARPS", "w")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = nullptr,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::mla_attention

namespace kplan::codegen {

KernelSource mla_attention_kernel(int64_t heads, int64_t kv_lora, int64_t rope, ElemType q, ElemType kv, ElemType out,
                                  std::string_view arch) {
  return instantiate(mla_attention::family(), {{"HEADS", heads}, {"C", kv_lora}, {"R", rope}, {"Q_DT", dtype_code(q)},
                                               {"KV_DT", dtype_code(kv)}, {"O_DT", dtype_code(out)}}, arch);
}

}  // namespace kplan::codegen
