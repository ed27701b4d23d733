#include "compiler/codegen/families/moe_gate_up.h"

namespace kplan::codegen::moe_gate_up {
namespace {

void check(const ParamValues& p) {
  if (p.at("W_FMT") == 1) require(p.at("H") % 32 == 0 && p.at("I") % 32 == 0, "moe_gate_up", "INT4 experts need H and I multiples of 32");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one warp per i, one block row per (token, k)
  d.grid = {ceil_div(kernel_param(k, "I"), kernel_param(k, "WARPS")), static_cast<uint32_t>(s.rows * kernel_param(k, "TOPK")), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "moe_gate_up",
      .header = "moe_experts.cuh",
      .function = "kp::moe_gate_up",
      .params = {dim_param("H", "h"), dim_param("I", "i"), dim_param("TOPK", "k"), dim_param("W_FMT", "wf"), dtype_param("X_DT", "x"), tuning_param("WARPS", "w")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::moe_gate_up

namespace kplan::codegen {

KernelSource moe_gate_up_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType x,
                                std::string_view arch) {
  return instantiate(moe_gate_up::family(), {{"H", hidden}, {"I", inter}, {"TOPK", top_k}, {"W_FMT", int4 ? 1 : 0}, {"X_DT", dtype_code(x)}},
                     arch);
}

}  // namespace kplan::codegen
