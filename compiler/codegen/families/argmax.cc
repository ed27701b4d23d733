#include "compiler/codegen/families/argmax.h"

namespace kplan::codegen::argmax {

const Family& family() {
  static const Family f{
      .name = "argmax",
      .header = "sampling.cuh",
      .function = "kp::argmax",
      .params = {dim_param("V", "v"), dtype_param("X_DT", "x"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::argmax

namespace kplan::codegen {

KernelSource argmax_kernel(int64_t vocab, ElemType logits, std::string_view arch) {
  return instantiate(argmax::family(), {{"V", vocab}, {"X_DT", dtype_code(logits)}}, arch);
}

}  // namespace kplan::codegen
