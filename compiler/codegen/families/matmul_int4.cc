#include "compiler/codegen/families/matmul_int4.h"

#include <string>

namespace kplan::codegen::matmul_int4 {
namespace {

void check(const ParamValues& p) {
  require(p.at("K") % 32 == 0, "matmul_int4", "K must be a multiple of the INT4 group (32)");
  require(p.at("RPW") >= 1 && p.at("KSPLIT") >= 1 && p.at("UNROLL") >= 1 && p.at("TOK_TILE") >= 1, "matmul_int4",
          "RPW, KSPLIT, UNROLL and TOK_TILE must be positive");
  require(p.at("WARPS") % p.at("KSPLIT") == 0, "matmul_int4",
          "KSPLIT (" + std::to_string(p.at("KSPLIT")) + ") must divide WARPS (" + std::to_string(p.at("WARPS")) + ")");
  require(p.at("RPW") * p.at("TOK_TILE") <= 32, "matmul_int4", "RPW * TOK_TILE accumulators above 32 would spill");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  // x: token tiles (fastest); y: row blocks of RPW rows per group of KSPLIT warps.
  const int64_t per_block = kernel_param(k, "RPW") * (kernel_param(k, "WARPS") / kernel_param(k, "KSPLIT"));
  const uint32_t row_blocks = ceil_div(kernel_param(k, "N"), per_block);
  require(row_blocks <= 65535, "matmul_int4", k.id + ": " + std::to_string(row_blocks) + " row blocks exceed grid.y's 65535");
  LaunchDims d = block_of(k);
  d.grid = {ceil_div(s.rows, kernel_param(k, "TOK_TILE")), row_blocks, 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "matmul_int4",
      .header = "matmul_int4.cuh",
      .function = "kp::matmul_int4",
      .params = {dim_param("K", "k"), dim_param("N", "n"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), dim_param("ACC", "acc"), tuning_param("WARPS", "w"), tuning_param("TOK_TILE", "tt"),
                 tuning_param("RPW", "r"), tuning_param("KSPLIT", "ks"), tuning_param("UNROLL", "u")},
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
