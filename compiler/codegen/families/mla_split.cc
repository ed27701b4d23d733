#include "compiler/codegen/families/mla_split.h"

#include <algorithm>
#include <string>

#include "compiler/codegen/heuristics/heuristics.h"

namespace kplan::codegen {

int64_t mla_split_smem_bytes(int64_t heads, int64_t kv_lora, int64_t rope, int64_t keys_per_tile, int64_t mma, bool f32_queries) {
  if (mma == 0) return keys_per_tile * (kv_lora + rope) * 4;
  const int64_t row = 2 * (kv_lora + rope + 8);  // a padded bf16 row (kMlaMmaPad)
  if (mma >= 2)  // MlaWideSmem: the queries, the ring's tiles, the probabilities, 5 f32 a head (MMA 3: a score row too)
    return heads * row + kMlaWideStages * keys_per_tile * row + heads * 2 * (keys_per_tile + 8) + 5 * heads * 4 +
           (mma == 3 ? heads * 4 * (keys_per_tile + 8) : 0);
  return keys_per_tile * row + 16 * row * (f32_queries ? 2 : 1) + 16 * (keys_per_tile + 1) * 4;
}

int64_t mla_split_heads_per_block(const KernelSource& partial) {
  switch (kernel_param(partial, "MMA")) {
    case 1: return 16;
    case 2:
    case 3: return kernel_param(partial, "HEADS");
    default: return kernel_param(partial, "WARPS");
  }
}

int64_t mla_split_count(const KernelSource& partial, int64_t max_context, int64_t n_tokens, std::string_view arch) {
  const bool wide = kernel_param(partial, "MMA") >= 2;
  const int64_t tokens = std::max<int64_t>(n_tokens, 1);
  const int64_t groups = ceil_div(kernel_param(partial, "HEADS"), mla_split_heads_per_block(partial));
  const int64_t by_keys = ceil_div(std::max<int64_t>(max_context, 0) + tokens, mla_split_min_keys(arch));
  // An all-heads block (MMA 2, 3) fills an SM's shared memory: one an SM, where the others take
  // two; its splits a token are capped too (their f32 partials' traffic).
  const int64_t blocks = wide ? mla_split_blocks(arch) / 2 : mla_split_blocks(arch);
  int64_t by_grid = std::max<int64_t>(1, blocks / (tokens * groups));
  if (wide) by_grid = std::min(by_grid, mla_split_wide_max_splits(arch));
  const int64_t splits = std::clamp<int64_t>(by_keys, 1, by_grid);
  require(splits <= kMlaMaxSplits, "mla_split_partial", "more splits than the combine's shared memory holds");
  return splits;
}

uint64_t mla_split_workspace_bytes(const KernelSource& partial, int64_t max_context, int64_t max_tokens, std::string_view arch) {
  int64_t rows = 0;  // the largest n_tokens * n_splits of any bucket
  for (int64_t t = 1; t <= max_tokens; ++t) rows = std::max(rows, t * mla_split_count(partial, max_context, t, arch));
  return 4 * static_cast<uint64_t>(rows * kernel_param(partial, "HEADS") * (kernel_param(partial, "C") + 2));
}

std::string mla_split_all_heads_misfit(int64_t heads, int64_t kv_lora, int64_t rope, int64_t kv_dtype, int64_t mma) {
  const std::string m = "MMA " + std::to_string(mma);
  if (kv_dtype != 1) return m + " reads a bf16 cache (KV_DT bf16)";
  if (heads % 16 != 0 || (kv_lora + rope) % 16 != 0) return m + " takes heads in m-tiles of 16 and C + R a multiple of 16";
  if (kv_lora % (16 * (heads / 8)) != 0) return m + " splits C over WARPS = HEADS / 8 warps in n-tile pairs of 16";
  if (mma == 3 && (kv_lora + rope) % 32 != 0) return "MMA 3 splits C + R in two halves of 16-wide k-steps (a multiple of 32)";
  if (mla_split_smem_bytes(heads, kv_lora, rope, 32, mma) > 224 * 1024) return "the staged rows exceed 224 KiB of shared memory";
  return "";
}

namespace mla_split_partial {
namespace {

void check(const ParamValues& p) {
  require(p.at("KT") >= 1 && p.at("KT") <= 32, "mla_split_partial", "KT (keys per tile) must be 1..32");
  require(p.at("WARPS") >= 1 && p.at("WARPS") <= 32, "mla_split_partial", "WARPS (heads per block) must be 1..32");
  const int64_t mma = p.at("MMA");
  require(mma >= 0 && mma <= 3, "mla_split_partial",
          "MMA must be 0 (CUDA cores), 1 (tensor cores, 16 heads a block), 2 or 3 (tensor cores, every head)");
  if (mma == 1) {
    require(p.at("KV_DT") == 1, "mla_split_partial", "MMA 1 reads a bf16 cache (KV_DT bf16)");
    require(p.at("HEADS") % 16 == 0 && (p.at("C") + p.at("R")) % 16 == 0, "mla_split_partial",
            "MMA 1 takes heads in m-tiles of 16 and C + R a multiple of 16");
    require(p.at("C") % (8 * p.at("WARPS")) == 0, "mla_split_partial", "MMA 1 splits C over WARPS warps in n-tiles of 8");
    require(p.at("KT") == 16 || p.at("KT") == 32, "mla_split_partial", "MMA 1 takes KT 16 or 32 (k-steps of 16 keys)");
  }
  if (mma >= 2) {
    const std::string why = mla_split_all_heads_misfit(p.at("HEADS"), p.at("C"), p.at("R"), p.at("KV_DT"), mma);
    require(why.empty(), "mla_split_partial", why);
    const std::string m = "MMA " + std::to_string(mma);
    require(p.at("WARPS") == 2 * p.at("HEADS") / 16, "mla_split_partial", m + " takes two warps an m-tile of 16 heads (WARPS = HEADS / 8)");
    require(p.at("KT") == 32, "mla_split_partial", m + " takes KT 32 (two warps' halves of 16 keys)");
  } else {
    require(mla_split_smem_bytes(p.at("HEADS"), p.at("C"), p.at("R"), p.at("KT"), mma, p.at("Q_DT") == 0) <= 224 * 1024, "mla_split_partial",
            "the staged rows exceed 224 KiB of shared memory");
  }
}

// grid (n_splits = the launch's batch, tokens, head groups), the staged tile in dynamic shared memory.
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);
  d.grid = {static_cast<uint32_t>(s.batch), static_cast<uint32_t>(s.rows), ceil_div(kernel_param(k, "HEADS"), mla_split_heads_per_block(k))};
  d.smem_bytes = static_cast<uint32_t>(mla_split_smem_bytes(kernel_param(k, "HEADS"), kernel_param(k, "C"), kernel_param(k, "R"),
                                                            kernel_param(k, "KT"), kernel_param(k, "MMA"), kernel_param(k, "Q_DT") == 0));
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "mla_split_partial",
      .header = "mla_split.cuh",
      .function = "kp::mla_split_partial",
      .params = {dim_param("HEADS", "h"), dim_param("C", "c"), dim_param("R", "r"), dtype_param("Q_DT", "q"), dtype_param("KV_DT", "kv"),
                 tuning_param("WARPS", "w"), tuning_param("KT", "kt"), tuning_param("MMA", "mma")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Warps,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace mla_split_partial

namespace mla_split_combine {
namespace {

void check(const ParamValues& p) {
  require(p.at("CH") >= 1 && p.at("C") % p.at("CH") == 0, "mla_split_combine", "CH (column chunks) must divide C");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);  // one block per (head, token, column chunk)
  d.grid = {static_cast<uint32_t>(kernel_param(k, "HEADS")), static_cast<uint32_t>(s.rows), static_cast<uint32_t>(kernel_param(k, "CH"))};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "mla_split_combine",
      .header = "mla_split.cuh",
      .function = "kp::mla_split_combine",
      .params = {dim_param("HEADS", "h"), dim_param("C", "c"), dtype_param("O_DT", "o"), tuning_param("THREADS", "t"), tuning_param("CH", "ch")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace mla_split_combine

namespace mla_split_combine_uv {
namespace {

void check(const ParamValues& p) {
  require(p.at("C") % 256 == 0, "mla_split_combine_uv", "C (the latent width) must be a multiple of 256 (a lane's 16-byte W_UV loads)");
  require(p.at("THREADS") % 32 == 0 && p.at("THREADS") >= 32, "mla_split_combine_uv", "THREADS must be whole warps");
  require(p.at("RB") >= 1 && p.at("N") % p.at("RB") == 0 && p.at("RB") % (p.at("THREADS") / 32) == 0, "mla_split_combine_uv",
          "RB (W_UV rows a block) must divide N and be a multiple of the warps");
}

LaunchDims geometry(const KernelSource& k, const LaunchShape&) {
  LaunchDims d = block_of(k);  // one block per (head, row chunk); every token in the block
  d.grid = {static_cast<uint32_t>(kernel_param(k, "HEADS")), static_cast<uint32_t>(kernel_param(k, "N") / kernel_param(k, "RB")), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "mla_split_combine_uv",
      .header = "mla_split.cuh",
      .function = "kp::mla_split_combine_uv",
      .waits_itself = true,
      .params = {dim_param("HEADS", "h"), dim_param("C", "c"), dim_param("N", "n"), dtype_param("L_DT", "l"), dtype_param("O_DT", "o"),
                 tuning_param("THREADS", "t"), tuning_param("RB", "rb")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace mla_split_combine_uv

KernelSource mla_split_partial_kernel(int64_t heads, int64_t kv_lora, int64_t rope, ElemType q, ElemType kv, std::string_view arch) {
  return instantiate(mla_split_partial::family(),
                     {{"HEADS", heads}, {"C", kv_lora}, {"R", rope}, {"Q_DT", dtype_code(q)}, {"KV_DT", dtype_code(kv)}}, arch);
}

KernelSource mla_split_combine_kernel(int64_t heads, int64_t kv_lora, ElemType out, std::string_view arch) {
  return instantiate(mla_split_combine::family(), {{"HEADS", heads}, {"C", kv_lora}, {"O_DT", dtype_code(out)}}, arch);
}

KernelSource mla_split_combine_uv_kernel(int64_t heads, int64_t kv_lora, int64_t v_rows, ElemType latent, ElemType out,
                                         std::string_view arch) {
  return instantiate(mla_split_combine_uv::family(),
                     {{"HEADS", heads}, {"C", kv_lora}, {"N", v_rows}, {"L_DT", dtype_code(latent)}, {"O_DT", dtype_code(out)}}, arch);
}

std::string mla_split_combine_uv_misfit(int64_t kv_lora, int64_t v_rows) {
  if (kv_lora % 256 != 0) return "the latent width " + std::to_string(kv_lora) + " is not a multiple of 256";
  if (v_rows % kMlaCombineUvRows != 0)
    return "W_UV's " + std::to_string(v_rows) + " rows a head are not a multiple of " + std::to_string(kMlaCombineUvRows);
  return "";
}

}  // namespace kplan::codegen
