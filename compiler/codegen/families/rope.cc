#include "compiler/codegen/families/rope.h"

namespace kplan::codegen::rope {
namespace {

void check(const ParamValues& p) {
  require(p.at("ROPE_DIM") % 2 == 0, "rope", "ROPE_DIM must be even");
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "rope",
      .header = "rope.cuh",
      .function = "kp::rope",
      .params = {dim_param("ROPE_DIM", "r"), dim_param("HEADS", "h"), dim_param("INTERLEAVED", "il"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::rope

namespace kplan::codegen {

KernelSource rope_kernel(int64_t rope_dim, int64_t heads, bool interleaved, ElemType x, ElemType y,
                         std::string_view arch) {
  return instantiate(rope::family(), {{"ROPE_DIM", rope_dim}, {"HEADS", heads}, {"INTERLEAVED", interleaved ? 1 : 0},
                                      {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)}}, arch);
}

}  // namespace kplan::codegen
