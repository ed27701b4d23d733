#pragma once
// Kernel families moe_grouped_gate_up, moe_grouped_down, moe_combine:
// kernels_templates/moe_grouped.cuh. Routed experts grouped by expert: each chosen expert's
// weights are streamed once per step however many of the step's tokens chose it (bf16 or INT4).
//   moe_grouped_gate_up: h[p, :] = silu(x[t] Wg[e]) * (x[t] Wu[e]) for each pair p = t * TOPK + k
//   moe_grouped_down:    partial[p, :] = topk_weights[p] * (h[p] Wd[e])
//   moe_combine:         out[t] (+)= sum_k partial[t * TOPK + k]
//
// Template parameters (compile-time constants, template order):
//   moe_grouped_gate_up: H, I, E, TOPK, W_FMT, X_DT (dtype), WARPS, ROWS, NT, PF, BLOCKS, MMA, RING (tuning),
//                        ROUTE, RNORM (the router folded in: MoeRouteFold), W_LAYOUT, XB, TMA (tuning)
//   moe_grouped_down:    H, I, E, TOPK, W_FMT, WARPS, ROWS, NT, PF, BLOCKS, MMA, RING (tuning), W_LAYOUT, XB, TMA (tuning)
//   moe_combine:         H, TOPK, Y_DT (dtype), ACC, THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/moe_grouped.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::moe_grouped_gate_up {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);               // X_DT, row t at t * x_row_stride
  KPLAN_PTR(topk_ids);        // int32 [n_tokens, TOPK] (ROUTE > 0: written by block (0, 0, 0))
  KPLAN_PTR(w_gate);          // stacked [E, I, H] (bf16) or int32 [E, I, H/8] (INT4)
  KPLAN_PTR(w_gate_scale);    // bf16 [E, I, H/32] (INT4; unused for bf16)
  KPLAN_PTR(w_up);            // as w_gate
  KPLAN_PTR(w_up_scale);      // as w_gate_scale
  KPLAN_PTR(h);               // f32 [n_tokens * TOPK, I] scratch
  KPLAN_I32(n_tokens);        // tokens in this step (ROUTE > 0: at most ROUTE)
  KPLAN_I32(x_row_stride);    // elements
  KPLAN_PTR(logits);          // ROUTE > 0: the router's f32 [n_tokens, E] (else unread)
  KPLAN_PTR(bias);            // ROUTE > 0: f32 [E] e_score_correction_bias (else unread)
  KPLAN_PTR(topk_weights);    // ROUTE > 0: f32 [n_tokens, TOPK], written by block (0, 0, 0)
  KPLAN_F32(routed_scaling);  // ROUTE > 0: routed_scaling_factor
};

const Family& family();

}  // namespace kplan::codegen::moe_grouped_gate_up

namespace kplan::codegen::moe_grouped_down {

struct Args {
  KPLAN_PTR(h);             // f32 [n_tokens * TOPK, I] (moe_grouped_gate_up's output)
  KPLAN_PTR(topk_ids);      // int32 [n_tokens, TOPK]
  KPLAN_PTR(topk_weights);  // f32 [n_tokens, TOPK]
  KPLAN_PTR(w_down);        // stacked [E, H, I] (bf16) or int32 [E, H, I/8] (INT4)
  KPLAN_PTR(w_down_scale);  // bf16 [E, H, I/32] (INT4; unused for bf16)
  KPLAN_PTR(partial);       // f32 [n_tokens * TOPK, H] scratch
  KPLAN_I32(n_tokens);      // tokens in this step
};

const Family& family();

}  // namespace kplan::codegen::moe_grouped_down

namespace kplan::codegen::moe_combine {

struct Args {
  KPLAN_PTR(partial);         // f32 [n_tokens * TOPK, H] (moe_grouped_down's output)
  KPLAN_PTR(out);             // Y_DT, row t at t * out_row_stride
  KPLAN_PTR(residual);        // Y_DT, out's layout: ACC 1 adds it (may be out); ACC 0: unread
  KPLAN_I32(n_tokens);        // tokens in this step
  KPLAN_I32(out_row_stride);  // elements
};

const Family& family();

}  // namespace kplan::codegen::moe_combine

namespace kplan::codegen {

// Gate/up's routing of its own step (the template's ROUTE, RNORM): the router's launch folded into
// it for steps of at most `max_tokens` tokens (0: it reads the router's topk_ids), an ungrouped
// (n_group 1) router with norm_topk_prob `norm`.
struct MoeRouteFold {
  int64_t max_tokens = 0;
  bool norm = false;
};

// The instances for these problem constants (tuning from heuristics/<arch>.cc; `tuning` given:
// those parameters, e.g. heuristics' moe_wide_tuning, the rest from the table). `w_layout`: the
// INT4 weights' device layout (W_LAYOUT; heuristics' moe_int4_layout decides it for a plan).
KernelSource moe_grouped_gate_up_kernel(int64_t hidden, int64_t inter, int64_t experts, int64_t top_k, bool int4, ElemType x,
                                        std::string_view arch = kDefaultArch, const ParamValues& tuning = {},
                                        const MoeRouteFold& route = {}, int64_t w_layout = 0);
KernelSource moe_grouped_down_kernel(int64_t hidden, int64_t inter, int64_t experts, int64_t top_k, bool int4,
                                     std::string_view arch = kDefaultArch, const ParamValues& tuning = {}, int64_t w_layout = 0);
KernelSource moe_combine_kernel(int64_t hidden, int64_t top_k, ElemType y, bool accumulate, std::string_view arch = kDefaultArch);

// The grid's expert slots at n_tokens: min(E, n_tokens * TOPK) (one per distinct expert at most).
int64_t moe_expert_slots(int64_t experts, int64_t top_k, int64_t n_tokens);
// Dynamic shared memory of an expert kernel: `pairs` staged f32 activation rows of the reduction
// dim (XB 1: bf16), rounded up to whole 1024-column chunks; MMA 3, 4 (MMA 2, 1 with 128 + q weights) add,
// after them, each group's C fragments of the chunk's n-tiles: a float4 per quad lane
// (kernels_templates/moe_grouped.cuh moe_stage_mma); RING >= 2 adds, after those, each of the
// block's `warps` warps' RING stages of kMoeRingStageBytes (kMoeRingStage there), and TMA 1 their
// 8-byte mbarriers after the stages.
int64_t moe_smem_bytes(int64_t reduction, int64_t pairs, int64_t mma = 0, int64_t warps = 0, int64_t ring = 0, int64_t xb = 0,
                       int64_t tma = 0);
inline constexpr int64_t kMoeRingStageBytes = 2304;  // a step's 16 rows x 8 groups of INT4 words (2 KiB) + their bf16 scales

}  // namespace kplan::codegen
