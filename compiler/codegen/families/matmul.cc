#include "compiler/codegen/families/matmul.h"

#include <string>

namespace kplan::codegen::matmul {

void check_rows_m_tiles(const char* family, const ParamValues& p) {
  const int64_t mma = p.at("MMA"), rpw = p.at("RPW"), tok = p.at("TOK_TILE");
  require(p.at("XPF") == 0 || (p.at("XPF") == 1 && mma == 2), family, "XPF must be 0, or 1 with MMA 2 (the rows-as-M tiles' x loads)");
  if (mma != 2) return;
  require(rpw % 16 == 0 && tok % 8 == 0 && tok <= 32, family, "MMA 2 tiles take RPW a multiple of 16 and TOK_TILE 8, 16, 24 or 32");
  require(p.at("K") % 8 == 0, family, "MMA needs K a multiple of 8");
  require(rpw * tok <= 2048, family, "RPW * TOK_TILE / 32 accumulators per lane above 64 would spill");
}

namespace {

// NORM 3's dynamic shared memory: the block's TOK_TILE normalised rows of K, bf16.
int64_t normed_rows_bytes(int64_t k, int64_t tok_tile) { return 2 * k * tok_tile; }

void check(const ParamValues& p) {
  const int64_t warps = p.at("WARPS"), ksplit = p.at("KSPLIT"), rpw = p.at("RPW"), tok = p.at("TOK_TILE"), mma = p.at("MMA");
  require(rpw >= 1 && ksplit >= 1 && p.at("UNROLL") >= 1 && tok >= 1, "matmul", "RPW, KSPLIT, UNROLL and TOK_TILE must be positive");
  require(warps % ksplit == 0, "matmul", "KSPLIT (" + std::to_string(ksplit) + ") must divide WARPS (" + std::to_string(warps) + ")");
  require(p.at("W_LAYOUT") == 0 || mma == 0, "matmul", "W_LAYOUT 1 takes MMA = 0 (its column stream is on the CUDA cores)");
  if (p.at("W_LAYOUT") == 1) {
    require(rpw * 8 * tok <= 64, "matmul", "W_LAYOUT 1: RPW * 8 * TOK_TILE accumulators above 64 would spill");
    require(ksplit == 1 || warps * rpw * 256 * tok * 4 <= 48 * 1024, "matmul",
            "W_LAYOUT 1: the slices' partial sums (WARPS * RPW * 256 * TOK_TILE f32) exceed 48 KiB of shared memory");
  }
  require(mma >= 0 && mma <= 2, "matmul", "MMA must be 0 (CUDA cores), 1 (tensor cores, tokens as M) or 2 (tensor cores, rows as M)");
  const int64_t norm = p.at("NORM");
  require(norm >= 0 && norm <= 3, "matmul",
          "NORM must be 0 (x as is), 1 (rms_norm(x)), 2 (rms_norm(x), its rows stored) or 3 (rms_norm(x) rounded to bf16 first)");
  require(norm == 0 || (p.at("W_LAYOUT") == 0 && mma != 1), "matmul", "NORM takes W_LAYOUT 0 and MMA 0 or 2 (the [N, K] stream)");
  require(norm != 3 || normed_rows_bytes(p.at("K"), tok) <= 200 * 1024, "matmul",
          "NORM 3: TOK_TILE normalised bf16 rows of K exceed 200 KiB of shared memory");
  const int64_t routed = p.at("ROUTED");
  require(routed <= 64, "matmul", "ROUTED (a MoE layer's pairs per token) must be at most 64");
  require(routed == 0 || (p.at("ACC") == 1 && p.at("W_LAYOUT") == 0), "matmul", "ROUTED takes ACC 1 and W_LAYOUT 0 (a residual add's epilogue)");
  require(p.at("PREFETCH") >= 0 && p.at("PREFETCH") <= 1 << 20, "matmul", "PREFETCH (KiB of W asked for before the wait) must be in 0..1048576");
  check_rows_m_tiles("matmul", p);
  if (mma == 1) {
    require(rpw % 8 == 0 && tok % 16 == 0 && tok <= 64, "matmul", "MMA tiles take RPW a multiple of 8 and TOK_TILE 16, 32, 48 or 64");
    require(p.at("K") % 8 == 0, "matmul", "MMA needs K a multiple of 8");
    require(rpw * tok <= 2048, "matmul", "RPW * TOK_TILE / 32 accumulators per lane above 64 would spill");
  } else if (p.at("W_LAYOUT") == 0 && mma == 0) {
    require(rpw * tok <= 64, "matmul", "RPW * TOK_TILE accumulators above 64 would spill");
  }
  require(p.at("W_LAYOUT") == 1 || warps * rpw * tok * 4 <= 48 * 1024, "matmul",
          "the partial sums (WARPS * RPW * TOK_TILE f32) exceed 48 KiB of shared memory");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  // x: token tiles (fastest, so the tiles of one row block share its weight reads in L2);
  // y: row blocks (W_LAYOUT 0: RPW rows per group of KSPLIT warps; 1: 256 * RPW columns per group);
  // z: the batch (heads).
  const int64_t warps = kernel_param(k, "WARPS"), groups = warps / kernel_param(k, "KSPLIT");
  const int64_t per_block = kernel_param(k, "RPW") * groups * (kernel_param(k, "W_LAYOUT") == 0 ? 1 : 256);
  const uint32_t row_blocks = ceil_div(kernel_param(k, "N"), per_block);
  require(row_blocks <= 65535, "matmul", k.id + ": " + std::to_string(row_blocks) + " row blocks exceed grid.y's 65535");
  LaunchDims d = block_of(k);
  d.grid = {ceil_div(s.rows, kernel_param(k, "TOK_TILE")), row_blocks, static_cast<uint32_t>(s.batch)};
  if (kernel_param(k, "NORM") == 3) d.smem_bytes = static_cast<uint32_t>(normed_rows_bytes(kernel_param(k, "K"), kernel_param(k, "TOK_TILE")));
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "matmul",
      .header = "matmul.cuh",
      .function = "kp::matmul",
      .prologue = "kp::matmul_prefetch",
      .params = {dim_param("K", "k"), dim_param("N", "n"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), dim_param("W_LAYOUT", "wl"), dim_param("ACC", "acc"), dim_param("ROUTED", "rt"), dim_param("NORM", "norm"), tuning_param("WARPS", "w"), tuning_param("TOK_TILE", "tt"),
                 tuning_param("RPW", "r"), tuning_param("KSPLIT", "ks"), tuning_param("UNROLL", "u"), tuning_param("MMA", "mma"),
                 tuning_param("PREFETCH", "pf"), tuning_param("XPF", "xp")},
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
                           std::string_view arch, int64_t mma_tokens, int64_t few_tokens, int64_t mma_rows, int64_t norm,
                           int64_t routed, int64_t prefetch_kib) {
  ParamValues p = {{"K", k}, {"N", n}, {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)}, {"W_LAYOUT", weight_kn ? 1 : 0},
                   {"ACC", accumulate ? 1 : 0}, {"ROUTED", routed}, {"NORM", norm}};
  if (prefetch_kib > 0) p["PREFETCH"] = prefetch_kib;
  if (mma_tokens > 0) {
    p["MMA"] = 1;
    p["TOK_TILE"] = mma_tokens;
    if (mma_rows > 0) {
      p["RPW"] = mma_rows;
      p["KSPLIT"] = 1;
    }
  } else if (few_tokens > 0) {
    p["TOK_TILE"] = few_tokens;
  }
  return instantiate(matmul::family(), p, arch);
}

}  // namespace kplan::codegen

namespace kplan::codegen {

KernelSource matmul_rows_m_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool accumulate, std::string_view arch, int64_t tokens,
                                  int64_t norm, int64_t routed, int64_t prefetch_kib) {
  ParamValues p = {{"K", k},         {"N", n},         {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)}, {"W_LAYOUT", 0},
                   {"ACC", accumulate ? 1 : 0}, {"ROUTED", routed}, {"NORM", norm}, {"MMA", 2},  {"TOK_TILE", tokens}};
  if (prefetch_kib > 0) p["PREFETCH"] = prefetch_kib;
  return instantiate(matmul::family(), p, arch);
}

}  // namespace kplan::codegen
