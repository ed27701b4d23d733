#include "compiler/codegen/families/matmul_siblings.h"

#include "compiler/codegen/families/matmul.h"

#include <string>

namespace kplan::codegen::matmul_siblings {
namespace {

void check(const ParamValues& p) {
  const int64_t glu = p.at("GLU");
  require(glu == 0 || glu == 1, "matmul_siblings", "GLU must be 0 or 1");
  if (glu == 0)
    require(p.at("N") > 0 && p.at("N2") > 0 && p.at("N3") >= 0, "matmul_siblings", "N and N2 must be positive, N3 at least 0");
  else
    require(p.at("N") >= 0 && p.at("N") % 2 == 0 && p.at("N2") > 0 && p.at("N3") == p.at("N2") && p.at("RPW") % 2 == 0, "matmul_siblings",
            "GLU 1 takes a gate and up pair of equal rows (N2 == N3), an even N and an even RPW (a pair within one warp's rows)");
  require(p.at("NORM") >= 0 && p.at("NORM") <= 2, "matmul_siblings",
          "NORM must be 0 (x as is), 1 (rms_norm(x)) or 2 (rms_norm(x), its rows stored)");
  const int64_t warps = p.at("WARPS"), ksplit = p.at("KSPLIT");
  require(p.at("RPW") >= 1 && ksplit >= 1 && p.at("UNROLL") >= 1 && p.at("TOK_TILE") >= 1, "matmul_siblings",
          "RPW, KSPLIT, UNROLL and TOK_TILE must be positive");
  require(warps % ksplit == 0, "matmul_siblings", "KSPLIT (" + std::to_string(ksplit) + ") must divide WARPS (" + std::to_string(warps) + ")");
  const int64_t mma = p.at("MMA");
  require(mma == 0 || mma == 2, "matmul_siblings", "MMA must be 0 (CUDA cores) or 2 (tensor cores, rows as M)");
  matmul::check_rows_m_tiles("matmul_siblings", p);
  require(p.at("YA_F32") == 0 || (p.at("YA_F32") == 1 && p.at("N") > 0), "matmul_siblings",
          "YA_F32 must be 0 (y is Y_DT) or 1 (y, the first sibling's, is f32; N > 0)");
  if (mma == 0) require(p.at("RPW") * p.at("TOK_TILE") <= 64, "matmul_siblings", "RPW * TOK_TILE accumulators above 64 would spill");
  const int64_t route_k = p.at("ROUTE_K");
  const bool f32_first = p.at("YA_F32") == 1 || p.at("Y_DT") == dtype_code(ElemType::F32);
  require(route_k >= 0 && route_k <= 32 && (route_k == 0 || (f32_first && glu == 1 && p.at("N") > 0 && p.at("N") <= 1024)), "matmul_siblings",
          "ROUTE_K (the router's top-k the launch routes, 0..32) takes f32 router logits (YA_F32 1 or Y_DT f32; 1..1024 rows) beside a GLU pair");
  require(p.at("RNORM") == 0 || (p.at("RNORM") == 1 && route_k > 0), "matmul_siblings", "RNORM must be 0, or 1 with ROUTE_K");
  require(warps * p.at("RPW") * p.at("TOK_TILE") * 4 <= 48 * 1024, "matmul_siblings",
          "the partial sums (WARPS * RPW * TOK_TILE f32) exceed 48 KiB of shared memory");
}

// x: token tiles; y: row blocks of RPW * WARPS / KSPLIT rows over the siblings' N + N2 + N3 rows.
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  const int64_t rows = kernel_param(k, "N") + kernel_param(k, "N2") + kernel_param(k, "N3");
  const int64_t per_block = kernel_param(k, "RPW") * (kernel_param(k, "WARPS") / kernel_param(k, "KSPLIT"));
  const uint32_t row_blocks = ceil_div(rows, per_block);
  require(row_blocks <= 65535, "matmul_siblings", k.id + ": " + std::to_string(row_blocks) + " row blocks exceed grid.y's 65535");
  LaunchDims d = block_of(k);
  d.grid = {ceil_div(s.rows, kernel_param(k, "TOK_TILE")), row_blocks, 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "matmul_siblings",
      .header = "matmul_siblings.cuh",
      .function = "kp::matmul_siblings",
      .params = {dim_param("K", "k"), dim_param("N", "na"), dim_param("N2", "nb"), dim_param("N3", "nc"), dim_param("GLU", "glu"), dim_param("NORM", "norm"), dtype_param("X_DT", "x"),
                 dtype_param("Y_DT", "y"), tuning_param("WARPS", "w"), tuning_param("TOK_TILE", "tt"), tuning_param("RPW", "r"),
                 tuning_param("KSPLIT", "ks"), tuning_param("UNROLL", "u"), tuning_param("MMA", "mma"),
                 tuning_param("XPF", "xp"),
                 optional_dim_param("YA_F32", "yaf"), optional_dim_param("ROUTE_K", "rk"), optional_dim_param("RNORM", "rn")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::matmul_siblings

namespace kplan::codegen {

KernelSource matmul_siblings_kernel(int64_t k, int64_t n, int64_t n2, int64_t n3, ElemType x, ElemType y, std::string_view arch,
                                    int64_t few_tokens, bool glu, int64_t norm, int64_t rows_m_tokens, bool first_f32, int64_t route_k,
                                    bool route_norm) {
  ParamValues p = {{"K", k},       {"N", n},       {"N2", n2}, {"N3", n3}, {"GLU", glu ? 1 : 0},       {"NORM", norm}, {"X_DT", dtype_code(x)},
                   {"Y_DT", dtype_code(y)}, {"YA_F32", first_f32 ? 1 : 0}, {"ROUTE_K", route_k}, {"RNORM", route_norm ? 1 : 0}};
  if (rows_m_tokens > 0) {
    p["MMA"] = 2;
    p["TOK_TILE"] = rows_m_tokens;
  } else if (few_tokens > 0) {
    p["TOK_TILE"] = few_tokens;
  }
  return instantiate(matmul_siblings::family(), p, arch);
}

}  // namespace kplan::codegen
