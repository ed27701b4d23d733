#include "compiler/codegen/families/add_norm.h"

namespace kplan::codegen::add_norm {

const Family& family() {
  static const Family f{
      .name = "add_norm",
      .header = "add_norm.cuh",
      .function = "kp::add_rms_norm",
      .params = {dim_param("H", "h"), dtype_param("A_DT", "a"), dtype_param("B_DT", "b"), dtype_param("O_DT", "o"), dtype_param("Y_DT", "y"),
                 tuning_param("THREADS", "t")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::add_norm

namespace kplan::codegen {

KernelSource add_norm_kernel(int64_t hidden, ElemType a, ElemType b, ElemType out, ElemType y, std::string_view arch) {
  return instantiate(add_norm::family(),
                     {{"H", hidden}, {"A_DT", dtype_code(a)}, {"B_DT", dtype_code(b)}, {"O_DT", dtype_code(out)}, {"Y_DT", dtype_code(y)}}, arch);
}

}  // namespace kplan::codegen
