#include "compiler/codegen/families/add.h"

namespace kplan::codegen::add {

const Family& family() {
  static const Family f{
      .name = "add",
      .header = "add.cuh",
      .function = "kp::add",
      .params = {dim_param("D", "d"), dtype_param("A_DT", "a"), dtype_param("B_DT", "b"), dtype_param("O_DT", "o"), tuning_param("THREADS", "t")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::add

namespace kplan::codegen {

KernelSource add_kernel(int64_t d, ElemType a, ElemType b, ElemType out, std::string_view arch) {
  return instantiate(add::family(), {{"D", d}, {"A_DT", dtype_code(a)}, {"B_DT", dtype_code(b)}, {"O_DT", dtype_code(out)}}, arch);
}

}  // namespace kplan::codegen
