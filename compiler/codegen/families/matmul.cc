#include "compiler/codegen/families/matmul.h"

namespace kplan::codegen::matmul {
namespace {

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  // W_LAYOUT 0: one warp per output n; 1: one thread per n. z: the batch (heads).
  const int64_t per_block = kernel_param(k, "W_LAYOUT") == 0 ? kernel_param(k, "WARPS") : 32 * kernel_param(k, "WARPS");
  LaunchDims d = block_of(k);
  d.grid = {ceil_div(kernel_param(k, "N"), per_block), ceil_div(s.rows, kernel_param(k, "TOK_TILE")), static_cast<uint32_t>(s.batch)};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "matmul",
      .header = "matmul.cuh",
      .function = "kp::matmul",
      .params = {dim_param("K", "k"), dim_param("N", "n"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), dim_param("W_LAYOUT", "wl"), dim_param("ACC", "acc"), tuning_param("WARPS", "w"), tuning_param("TOK_TILE", "tt")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = nullptr,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::matmul

namespace kplan::codegen {

KernelSource matmul_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool weight_kn, bool accumulate,
                           std::string_view arch) {
  return instantiate(matmul::family(), {{"K", k}, {"N", n}, {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)},
                                        {"W_LAYOUT", weight_kn ? 1 : 0}, {"ACC", accumulate ? 1 : 0}}, arch);
}

}  // namespace kplan::codegen
