#include "compiler/codegen/families/topk.h"

namespace kplan::codegen::topk {
namespace {

void check(const ParamValues& p) {
  require(p.at("K") >= 1 && p.at("K") <= p.at("V"), "topk", "K must be in [1, V]");
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "topk",
      .header = "sampling.cuh",
      .function = "kp::topk",
      .params = {dim_param("V", "v"), dim_param("K", "k"), dtype_param("X_DT", "x"), dim_param("LOGPROB", "lp"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::topk

namespace kplan::codegen {

KernelSource topk_kernel(int64_t vocab, int64_t k, ElemType logits, bool log_probs, std::string_view arch) {
  return instantiate(topk::family(), {{"V", vocab}, {"K", k}, {"X_DT", dtype_code(logits)}, {"LOGPROB", log_probs ? 1 : 0}}, arch);
}

}  // namespace kplan::codegen
