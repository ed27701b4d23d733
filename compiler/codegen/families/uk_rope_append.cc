#include "compiler/codegen/families/uk_rope_append.h"

#include "compiler/codegen/families/rope.h"

namespace kplan::codegen::uk_rope_append {
namespace {

void check(const ParamValues& p) {
  require(p.at("KSPLIT") > 0 && p.at("WARPS") % p.at("KSPLIT") == 0, "uk_rope_append", "KSPLIT must divide WARPS");
  require(p.at("HEADS") > 0, "uk_rope_append", "HEADS (W_UK's batch, the queries' rope heads) must be positive");
  require(p.at("R") % 2 == 0 && 32 * p.at("WARPS") >= p.at("R") / 2, "uk_rope_append",
          "R must be even and the block's threads cover the key's R / 2 rope pairs");
}

// W_UK's grid (matmul.cc's, W_LAYOUT 1: token tiles, 256 * RPW columns a group of KSPLIT warps,
// HEADS) and as many more z-slices of it as the rope-append's (tokens x parts) blocks take.
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  const int64_t heads = kernel_param(k, "HEADS"), threads = 32 * kernel_param(k, "WARPS");
  const int64_t groups = kernel_param(k, "WARPS") / kernel_param(k, "KSPLIT");
  const uint32_t gx = ceil_div(s.rows, kernel_param(k, "TOK_TILE")), gy = ceil_div(kernel_param(k, "N"), 256 * kernel_param(k, "RPW") * groups);
  const int64_t parts = 1 + ceil_div(heads, rope_heads_per_block(kernel_param(k, "R"), heads, threads));
  LaunchDims d = block_of(k);
  d.grid = {gx, gy, static_cast<uint32_t>(heads) + ceil_div(s.rows * parts, static_cast<int64_t>(gx) * gy)};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "uk_rope_append",
      .header = "uk_rope_append.cuh",
      .function = "kp::uk_rope_append",
      .prologue = "kp::uk_rope_append_prefetch",
      .params = {dim_param("K", "k"), dim_param("N", "n"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), dim_param("WARPS", "w"),
                 dim_param("TOK_TILE", "tt"), dim_param("RPW", "r"), dim_param("KSPLIT", "ks"), dim_param("UNROLL", "u"),
                 dim_param("PREFETCH", "pf"), dim_param("C", "c"), dim_param("R", "rr"), dim_param("HEADS", "h"), dim_param("INTERLEAVED", "il"),
                 dtype_param("Q_DT", "q"), dtype_param("KV_DT", "kv")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::uk_rope_append

namespace kplan::codegen {

KernelSource uk_rope_append_kernel(const KernelSource& uk, int64_t kv_lora, int64_t rope, int64_t heads, bool interleaved, ElemType q,
                                   ElemType kv, std::string_view arch) {
  require(uk.family == "matmul" && kernel_param(uk, "W_LAYOUT") == 1 && kernel_param(uk, "MMA") == 0 && kernel_param(uk, "ACC") == 0 &&
              kernel_param(uk, "ROUTED") == 0 && kernel_param(uk, "NORM") == 0 && kernel_param(uk, "XPF") == 0,
          "uk_rope_append", uk.id + " is not a plain [K, N] CUDA-core head_matmul instance");
  ParamValues p = {{"C", kv_lora}, {"R", rope}, {"HEADS", heads}, {"INTERLEAVED", interleaved ? 1 : 0}, {"Q_DT", dtype_code(q)},
                   {"KV_DT", dtype_code(kv)}};
  for (const char* name : {"K", "N", "X_DT", "Y_DT", "WARPS", "TOK_TILE", "RPW", "KSPLIT", "UNROLL", "PREFETCH"}) p[name] = kernel_param(uk, name);
  return instantiate(uk_rope_append::family(), p, arch);
}

}  // namespace kplan::codegen
