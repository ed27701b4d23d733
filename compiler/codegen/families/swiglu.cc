#include "compiler/codegen/families/swiglu.h"

namespace kplan::codegen::swiglu {
namespace {

// A row over ceil(I / (4 * THREADS)) blocks (about 4 elements a thread), a grid row per token.
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);
  d.grid = {ceil_div(kernel_param(k, "I"), 4 * kernel_param(k, "THREADS")), static_cast<uint32_t>(s.rows), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "swiglu",
      .header = "swiglu.cuh",
      .function = "kp::swiglu",
      .params = {dim_param("I", "i"), dtype_param("G_DT", "g"), dtype_param("U_DT", "u"), dtype_param("O_DT", "o"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::swiglu

namespace kplan::codegen {

KernelSource swiglu_kernel(int64_t width, ElemType gate, ElemType up, ElemType out, std::string_view arch) {
  return instantiate(swiglu::family(), {{"I", width}, {"G_DT", dtype_code(gate)}, {"U_DT", dtype_code(up)}, {"O_DT", dtype_code(out)}}, arch);
}

}  // namespace kplan::codegen
