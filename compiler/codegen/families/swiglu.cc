#include "compiler/codegen/families/swiglu.h"

namespace kplan::codegen::swiglu {

const Family& family() {
  static const Family f{
      .name = "swiglu",
      .header = "swiglu.cuh",
      .function = "kp::swiglu",
      .params = {dim_param("I", "i"), dtype_param("G_DT", "g"), dtype_param("U_DT", "u"), dtype_param("O_DT", "o"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::swiglu

namespace kplan::codegen {

KernelSource swiglu_kernel(int64_t width, ElemType gate, ElemType up, ElemType out, std::string_view arch) {
  return instantiate(swiglu::family(), {{"I", width}, {"G_DT", dtype_code(gate)}, {"U_DT", dtype_code(up)}, {"O_DT", dtype_code(out)}}, arch);
}

}  // namespace kplan::codegen
