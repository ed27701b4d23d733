#include "compiler/codegen/families/matmul_int4.h"

namespace kplan::codegen::matmul_int4 {
namespace {

void check(const ParamValues& p) {
  require(p.at("K") % 32 == 0, "matmul_int4", "K must be a multiple of the INT4 group (32)");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);
  d.grid = {ceil_div(kernel_param(k, "N"), kernel_param(k, "WARPS")), ceil_div(s.rows, kernel_param(k, "TOK_TILE")), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "matmul_int4",
      .header = "matmul_int4.cuh",
      .function = "kp::matmul_int4",
      .params = {dim_param("K", "k"), dim_param("N", "n"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), dim_param("ACC", "acc"), tuning_param("WARPS", "w"), tuning_param("TOK_TILE", "tt")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::matmul_int4

namespace kplan::codegen {

KernelSource matmul_int4_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool accumulate,
                                std::string_view arch) {
  return instantiate(matmul_int4::family(), {{"K", k}, {"N", n}, {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)}, {"ACC", accumulate ? 1 : 0}},
                     arch);
}

}  // namespace kplan::codegen
