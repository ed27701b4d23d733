#pragma once
// Kernel families mla_split_partial, mla_split_combine, mla_split_combine_uv: kernels_templates/mla_split.cuh.
// MLA attention in absorbed form split over the context: each block stages a tile of cache rows
// in shared memory once for a group of heads and writes per-split online-softmax partials
// (m, l, acc[C]); the combine merges them by log-sum-exp. Same result and output layout as
// mla_attention; the op rule (compiler/passes/op_rules.cc) lowers mla_attention to this pair.
//
// Template parameters (compile-time constants, template order):
//   mla_split_partial: HEADS, C, R, Q_DT (dtype), KV_DT (dtype), WARPS (tuning), KT (tuning), MMA (tuning)
//   mla_split_combine: HEADS, C, O_DT (dtype), THREADS (tuning), CH (tuning)
//   mla_split_combine_uv: HEADS, C, N, L_DT (dtype), O_DT (dtype), THREADS (tuning), RB (tuning)
// See the template's doc block for their meaning and the launch geometry (families/mla_split.cc).
#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::mla_split_partial {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(q_latent);             // Q_DT; (t, h) row at t * q_latent_row_stride + h * C
  KPLAN_PTR(q_rope);               // Q_DT; (t, h) row at t * q_rope_row_stride + h * q_rope_head_stride
  KPLAN_PTR(kv_cache);             // KV_DT [max_slots, C + R]
  KPLAN_PTR(cache_len);            // int32 [1]: committed rows before this step
  KPLAN_PTR(tree_mask);            // uint32 [n_tokens, mask_words], or null for causal
  KPLAN_PTR(workspace);            // f32 [n_tokens, HEADS, n_splits, C + 2] scratch
  KPLAN_I32(n_tokens);             // queries in this step
  KPLAN_I32(n_splits);             // context splits (= the launch's grid.x)
  KPLAN_I32(q_latent_row_stride);  // elements
  KPLAN_I32(q_rope_row_stride);    // elements
  KPLAN_I32(q_rope_head_stride);   // elements
  KPLAN_I32(mask_words);           // ceil(n_tokens / 32)
  KPLAN_F32(softmax_scale);        // applied to the scores
};

const Family& family();

}  // namespace kplan::codegen::mla_split_partial

namespace kplan::codegen::mla_split_combine {

struct Args {
  KPLAN_PTR(workspace);       // f32 [n_tokens, HEADS, n_splits, C + 2] (mla_split_partial's)
  KPLAN_PTR(out);             // O_DT; (t, h) row at t * out_row_stride + h * C
  KPLAN_I32(n_tokens);        // queries in this step
  KPLAN_I32(n_splits);        // as the partial's
  KPLAN_I32(out_row_stride);  // elements
};

const Family& family();

}  // namespace kplan::codegen::mla_split_combine

namespace kplan::codegen::mla_split_combine_uv {

struct Args {
  KPLAN_PTR(workspace);      // f32 [n_tokens, HEADS, n_splits, C + 2] (mla_split_partial's)
  KPLAN_PTR(w);              // bf16; head h's W_UV [N, C] row-major at h * w_head_stride
  KPLAN_PTR(y);              // O_DT; (t, h, n) at t * y_row_stride + h * N + n
  KPLAN_I32(n_tokens);       // queries in this step
  KPLAN_I32(n_splits);       // as the partial's
  KPLAN_I32(w_head_stride);  // elements
  KPLAN_I32(y_row_stride);   // elements
};

const Family& family();

}  // namespace kplan::codegen::mla_split_combine_uv

namespace kplan::codegen {

// The instances for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource mla_split_partial_kernel(int64_t heads, int64_t kv_lora, int64_t rope, ElemType q, ElemType kv,
                                      std::string_view arch = kDefaultArch);
KernelSource mla_split_combine_kernel(int64_t heads, int64_t kv_lora, ElemType out, std::string_view arch = kDefaultArch);
// The combine with W_UV's product (v_rows rows a head): `latent` the dtype the combine would store
// its result in (the product reads it rounded to that), `out` the product's.
KernelSource mla_split_combine_uv_kernel(int64_t heads, int64_t kv_lora, int64_t v_rows, ElemType latent, ElemType out,
                                         std::string_view arch = kDefaultArch);
// W_UV rows a mla_split_combine_uv block takes (its RB, as the heuristics tune it).
inline constexpr int64_t kMlaCombineUvRows = 32;

// Why mla_split_combine_uv cannot take these constants, or "" when it can: C a multiple of 256,
// v_rows a multiple of kMlaCombineUvRows.
std::string mla_split_combine_uv_misfit(int64_t kv_lora, int64_t v_rows);

// Splits a combine takes at most (kp::kMlaMaxSplits in mla_split.cuh: its per-split weights in
// shared memory).
inline constexpr int64_t kMlaMaxSplits = 512;

// Splits of a step of n_tokens queries over a cache of up to max_context rows, for `partial` (its
// heads per block) on `arch`: ceil((max_context + n_tokens) / mla_split_min_keys(arch)),
// clamped to [1, max(1, blocks / (n_tokens * head groups))] where blocks is two per SM of the
// arch (mla_split_blocks in heuristics), one per SM for MMA 2 and 3 (their shared memory fills the
// SM), whose splits a token are also capped (mla_split_wide_max_splits: 64). The kernel takes any
// runtime cache length: a split takes ceil(keys / n_splits) keys, at least a tile.
int64_t mla_split_count(const KernelSource& partial, int64_t max_context, int64_t n_tokens, std::string_view arch);

// Workspace bytes of the pair: the largest n_tokens * n_splits over 1..max_tokens tokens, times
// HEADS * (C + 2) f32.
uint64_t mla_split_workspace_bytes(const KernelSource& partial, int64_t max_context, int64_t max_tokens, std::string_view arch);

// Tiles in the all-heads partials' cp.async ring (kp::kMlaWideStages in mla_split.cuh).
inline constexpr int64_t kMlaWideStages = 3;

// Dynamic shared memory of a partial: MMA 0, its KT staged rows of C + R f32; MMA 1, the KT rows
// and the 16 query rows as bf16 (padded by 8 elements; f32 queries a lo row too) and the tile's
// 16 x (KT + 1) f32 scores; MMA 2 and 3, every head's query row and kMlaWideStages tiles of KT rows
// (padded bf16), the heads' probabilities [heads][KT + 8] bf16 and 5 f32 a head (MMA 3 also a row
// of KT + 8 f32 scores a head).
int64_t mla_split_smem_bytes(int64_t heads, int64_t kv_lora, int64_t rope, int64_t keys_per_tile, int64_t mma = 0, bool f32_queries = false);

// Why the all-heads partials (MMA 2, 3: KT 32, HEADS / 8 warps) cannot take these problem
// constants, or "" when they can: a bf16 cache (kv_dtype 1), heads by 16, C + R by 16 (MMA 3: 32),
// C in n-tile pairs over the warps, the shared memory within 224 KiB. The family's check and the
// tuning that picks MMA 2 (heuristics' mla_split_wide) both ask it.
std::string mla_split_all_heads_misfit(int64_t heads, int64_t kv_lora, int64_t rope, int64_t kv_dtype, int64_t mma);

// Heads a partial's block takes: WARPS (one warp a head), 16 for MMA 1 (one m-tile), every head
// for MMA 2 and 3.
int64_t mla_split_heads_per_block(const KernelSource& partial);

}  // namespace kplan::codegen
