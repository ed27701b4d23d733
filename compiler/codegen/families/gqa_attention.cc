#include "compiler/codegen/families/gqa_attention.h"

namespace kplan::codegen::gqa_attention {
namespace {

void check(const ParamValues& p) {
  require(p.at("KV_HEADS") >= 1 && p.at("HEADS") % p.at("KV_HEADS") == 0, "gqa_attention", "HEADS % KV_HEADS != 0");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one block per (head, query)
  d.grid = {static_cast<uint32_t>(kernel_param(k, "HEADS")), static_cast<uint32_t>(s.rows), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "gqa_attention",
      .header = "gqa_attention.cuh",
      .function = "kp::gqa_attention",
      .params = {dim_param("HEADS", "h"), dim_param("KV_HEADS", "kvh"), dim_param("D", "d"), dtype_param("Q_DT", "q"), dtype_param("KV_DT", "kv"), dtype_param("O_DT", "o"), tuning_param("WARPS", "w")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::gqa_attention

namespace kplan::codegen {

KernelSource gqa_attention_kernel(int64_t heads, int64_t kv_heads, int64_t head_dim, ElemType q, ElemType kv, ElemType out,
                                  std::string_view arch) {
  return instantiate(gqa_attention::family(), {{"HEADS", heads}, {"KV_HEADS", kv_heads}, {"D", head_dim},
                                               {"Q_DT", dtype_code(q)}, {"KV_DT", dtype_code(kv)}, {"O_DT", dtype_code(out)}}, arch);
}

}  // namespace kplan::codegen
