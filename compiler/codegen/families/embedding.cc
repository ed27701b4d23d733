#include "compiler/codegen/families/embedding.h"

namespace kplan::codegen::embedding {

const Family& family() {
  static const Family f{
      .name = "embedding",
      .header = "embedding.cuh",
      .function = "kp::embedding",
      .params = {dim_param("H", "h"), dtype_param("OUT_DT", "o"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::embedding

namespace kplan::codegen {

KernelSource embedding_kernel(int64_t hidden, ElemType out, std::string_view arch) {
  return instantiate(embedding::family(), {{"H", hidden}, {"OUT_DT", dtype_code(out)}}, arch);
}

}  // namespace kplan::codegen
