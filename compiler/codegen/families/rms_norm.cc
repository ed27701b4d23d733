#include "compiler/codegen/families/rms_norm.h"

namespace kplan::codegen::rms_norm {

const Family& family() {
  static const Family f{
      .name = "rms_norm",
      .header = "rms_norm.cuh",
      .function = "kp::rms_norm",
      .params = {dim_param("D", "d"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::rms_norm

namespace kplan::codegen {

KernelSource rms_norm_kernel(int64_t d, ElemType x, ElemType y, std::string_view arch) {
  return instantiate(rms_norm::family(), {{"D", d}, {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)}}, arch);
}

}  // namespace kplan::codegen
