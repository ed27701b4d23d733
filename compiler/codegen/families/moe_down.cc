#include "compiler/codegen/families/moe_down.h"

namespace kplan::codegen::moe_down {
namespace {

void check(const ParamValues& p) {
  if (p.at("W_FMT") == 1) require(p.at("H") % 32 == 0 && p.at("I") % 32 == 0, "moe_down", "INT4 experts need H and I multiples of 32");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one warp per output j
  d.grid = {ceil_div(kernel_param(k, "H"), kernel_param(k, "WARPS")), static_cast<uint32_t>(s.rows), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "moe_down",
      .header = "moe_experts.cuh",
      .function = "kp::moe_down",
      .params = {dim_param("H", "h"), dim_param("I", "i"), dim_param("TOPK", "k"), dim_param("W_FMT", "wf"), dtype_param("Y_DT", "y"), dim_param("ACC", "acc"), tuning_param("WARPS", "w")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::moe_down

namespace kplan::codegen {

KernelSource moe_down_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType y, bool accumulate,
                             std::string_view arch) {
  return instantiate(moe_down::family(), {{"H", hidden}, {"I", inter}, {"TOPK", top_k}, {"W_FMT", int4 ? 1 : 0}, {"Y_DT", dtype_code(y)},
                                          {"ACC", accumulate ? 1 : 0}}, arch);
}

}  // namespace kplan::codegen
