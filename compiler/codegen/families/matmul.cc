#include "compiler/codegen/families/matmul.h"

#include <string>

namespace kplan::codegen::matmul {
namespace {

void check(const ParamValues& p) {
  const int64_t warps = p.at("WARPS"), ksplit = p.at("KSPLIT");
  require(p.at("RPW") >= 1 && ksplit >= 1 && p.at("UNROLL") >= 1 && p.at("TOK_TILE") >= 1, "matmul",
          "RPW, KSPLIT, UNROLL and TOK_TILE must be positive");
  require(warps % ksplit == 0, "matmul", "KSPLIT (" + std::to_string(ksplit) + ") must divide WARPS (" + std::to_string(warps) + ")");
  require(p.at("W_LAYOUT") == 0 || (p.at("RPW") == 1 && ksplit == 1 && p.at("UNROLL") == 1), "matmul",
          "W_LAYOUT 1 takes RPW = KSPLIT = UNROLL = 1");
  require(p.at("RPW") * p.at("TOK_TILE") <= 64, "matmul", "RPW * TOK_TILE accumulators above 64 would spill");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  // x: token tiles (fastest, so the tiles of one row block share its weight reads in L2);
  // y: row blocks (W_LAYOUT 0: RPW rows per group of KSPLIT warps; 1: one thread per n);
  // z: the batch (heads).
  const int64_t warps = kernel_param(k, "WARPS");
  const int64_t per_block = kernel_param(k, "W_LAYOUT") == 0 ? kernel_param(k, "RPW") * (warps / kernel_param(k, "KSPLIT")) : 32 * warps;
  const uint32_t row_blocks = ceil_div(kernel_param(k, "N"), per_block);
  require(row_blocks <= 65535, "matmul", k.id + ": " + std::to_string(row_blocks) + " row blocks exceed grid.y's 65535");
  LaunchDims d = block_of(k);
  d.grid = {ceil_div(s.rows, kernel_param(k, "TOK_TILE")), row_blocks, static_cast<uint32_t>(s.batch)};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "matmul",
      .header = "matmul.cuh",
      .function = "kp::matmul",
      .params = {dim_param("K", "k"), dim_param("N", "n"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), dim_param("W_LAYOUT", "wl"), dim_param("ACC", "acc"), tuning_param("WARPS", "w"), tuning_param("TOK_TILE", "tt"),
                 tuning_param("RPW", "r"), tuning_param("KSPLIT", "ks"), tuning_param("UNROLL", "u")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
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
