#include "compiler/codegen/families/moe_router.h"

namespace kplan::codegen::moe_router {
namespace {

void check(const ParamValues& p) {
  const char* n = "moe_router";
  require(p.at("N_GROUP") >= 1 && p.at("E") % p.at("N_GROUP") == 0, n, "E must split into N_GROUP groups");
  require(p.at("N_GROUP") <= 32 && p.at("TOPK_GROUP") >= 1 && p.at("TOPK_GROUP") <= p.at("N_GROUP"), n, "bad TOPK_GROUP");
  require(p.at("E") <= 1024 && p.at("TOPK") >= 1 && p.at("TOPK") <= p.at("E"), n, "bad E / TOPK");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one warp per token
  d.grid = {ceil_div(s.rows, kernel_param(k, "WARPS")), 1, 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "moe_router",
      .header = "moe_router.cuh",
      .function = "kp::moe_router",
      .params = {dim_param("E", "e"), dim_param("TOPK", "k"), dim_param("N_GROUP", "g"), dim_param("TOPK_GROUP", "tg"), dim_param("NORM", "norm"), tuning_param("WARPS", "w")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::moe_router

namespace kplan::codegen {

KernelSource moe_router_kernel(const ModelConfig& c, std::string_view arch) {
  return instantiate(moe_router::family(), {{"E", c.n_routed_experts}, {"TOPK", c.num_experts_per_tok}, {"N_GROUP", c.n_group},
                                            {"TOPK_GROUP", c.topk_group}, {"NORM", c.norm_topk_prob ? 1 : 0}}, arch);
}

}  // namespace kplan::codegen
