#include "compiler/codegen/families/embedding_norm.h"

namespace kplan::codegen::embedding_norm {

const Family& family() {
  static const Family f{
      .name = "embedding_norm",
      .header = "embedding_norm.cuh",
      .function = "kp::embedding_rms_norm",
      .params = {dim_param("H", "h"), dtype_param("OUT_DT", "o"), dtype_param("Y_DT", "y"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::embedding_norm

namespace kplan::codegen {

KernelSource embedding_norm_kernel(int64_t hidden, ElemType out, ElemType y, std::string_view arch) {
  return instantiate(embedding_norm::family(), {{"H", hidden}, {"OUT_DT", dtype_code(out)}, {"Y_DT", dtype_code(y)}}, arch);
}

}  // namespace kplan::codegen
