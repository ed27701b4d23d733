#include "compiler/codegen/families/copy_rows.h"

namespace kplan::codegen::copy_rows {

const Family& family() {
  static const Family f{
      .name = "copy_rows",
      .header = "copy_rows.cuh",
      .function = "kp::copy_rows",
      .params = {dim_param("COLS", "c"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::copy_rows

namespace kplan::codegen {

KernelSource copy_rows_kernel(int64_t cols, ElemType x, ElemType y, std::string_view arch) {
  return instantiate(copy_rows::family(), {{"COLS", cols}, {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)}}, arch);
}

}  // namespace kplan::codegen
