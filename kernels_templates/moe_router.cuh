#pragma once
// DeepSeek-V3 "noaux_tc" router on the gate's f32 logits, as HF transformers computes it:
//   s       = sigmoid(logits[t])                       (E scores)
//   choice  = s + bias                                 (e_score_correction_bias)
//   group g score = sum of the 2 largest choice values in group g (E / N_GROUP experts each)
//   keep the TOPK_GROUP best groups; choice of experts outside them is set to 0.0 (not -inf,
//   exactly as transformers' masked_fill does)
//   ids     = the TOPK experts with the largest choice (ties: the smaller index), in descending
//             order
//   w[k]    = s[ids[k]]; NORM: w /= (sum(w) + 1e-20); w *= routed_scaling
// One warp per token.
//
// Template parameters:
//   E           routed experts (<= 1024)
//   TOPK        experts per token
//   N_GROUP     expert groups (<= 32; 1 disables group limiting)
//   TOPK_GROUP  groups kept
//   NORM        norm_topk_prob (0 / 1)
//   WARPS       tokens per block
// Launch: grid (ceil(n_tokens / WARPS)), block (32 * WARPS).
// Arguments:
//   logits        f32 [n_tokens, E]
//   bias          f32 [E]
//   topk_ids      int32 [n_tokens, TOPK] (out)
//   topk_weights  f32 [n_tokens, TOPK] (out)
//   n_tokens, routed_scaling
#include "common.cuh"

namespace kp {

// One token's routing by one warp: the TOPK ids (ties: the smaller index, descending choice) and
// their weights (normalised and scaled), held by every lane. choice_row: E floats of shared memory
// for the group scores (read only when N_GROUP > 1). Shared by the router kernel and the expert
// gate/up launch that routes its step itself (moe_grouped.cuh's ROUTE).
template <int E, int TOPK, int N_GROUP, int TOPK_GROUP, int NORM>
__device__ __forceinline__ void moe_route_token(const float* row, const float* b, float* choice_row, float routed_scaling,
                                                int (&ids)[TOPK], float (&w)[TOPK]) {
  constexpr int EPL = (E + 31) / 32;  // experts per lane: lane owns e = lane + 32 * i
  constexpr int GROUP = E / N_GROUP;
  static_assert(E % N_GROUP == 0 && N_GROUP <= 32 && TOPK_GROUP <= N_GROUP && E <= 1024, "router shape");
  const int lane = threadIdx.x % 32;
  // Each lane keeps its experts' scores: the chosen ones' weights come from a shuffle, not from
  // a global load of the logit after each pick (8 dependent L2 round trips at K2.6's top-8).
  // Every logit and bias load is issued before the first sigmoid (the empty asm with a memory
  // clobber keeps the compiler from sinking them to their uses): the division's slow path is a
  // call ptxas does not hoist loads across, so loads beside each sigmoid were 12 dependent L2
  // round trips at K2.6's 384 experts (~14% of the routing gate/up's warp samples at 1 token,
  // ncu, bench/RESULTS.md 2026-12-06 session 38).
  float choice[EPL], score[EPL], bias[EPL];
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + 32 * i;
    score[i] = e < E ? row[e] : 0.f;
    bias[i] = e < E ? b[e] : 0.f;
  }
  asm volatile("" ::: "memory");
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = lane + 32 * i;
    score[i] = e < E ? sigmoid(score[i]) : 0.f;
    choice[i] = e < E ? score[i] + bias[i] : 0.f;
  }

  if constexpr (N_GROUP > 1) {
#pragma unroll
    for (int i = 0; i < EPL; ++i)
      if (lane + 32 * i < E) choice_row[lane + 32 * i] = choice[i];
    __syncwarp();
    // Lane g scores group g, then TOPK_GROUP rounds of warp argmax pick the groups.
    float gscore = neg_inf();
    if (lane < N_GROUP) {
      float best = neg_inf(), second = neg_inf();
      for (int j = 0; j < GROUP; ++j) {
        const float v = choice_row[lane * GROUP + j];
        if (v > best) {
          second = best;
          best = v;
        } else if (v > second) {
          second = v;
        }
      }
      gscore = best + second;
    }
    unsigned kept = 0;
    for (int k = 0; k < TOPK_GROUP; ++k) {
      float v = ((kept >> lane) & 1u) ? neg_inf() : gscore;
      int g = lane < N_GROUP && !((kept >> lane) & 1u) ? lane : 1 << 30;
      if (lane >= N_GROUP) v = neg_inf();
      g = warp_argmax_index(v, g);
      kept |= 1u << g;
    }
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int e = lane + 32 * i;
      if (e < E && !((kept >> (e / GROUP)) & 1u)) choice[i] = 0.f;
    }
  }

  unsigned taken = 0;  // bit i: expert lane + 32 * i already chosen
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) {
    float v = neg_inf();
    int e_best = 1 << 30;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int e = lane + 32 * i;
      if (e < E && !((taken >> i) & 1u) && (choice[i] > v || (choice[i] == v && e < e_best))) {
        v = choice[i];
        e_best = e;
      }
    }
    e_best = warp_argmax_index(v, e_best);
    float mine = 0.f;  // the owner lane's score of e_best
#pragma unroll
    for (int i = 0; i < EPL; ++i)
      if (lane + 32 * i == e_best) mine = score[i];
    if (e_best % 32 == lane) taken |= 1u << (e_best / 32);
    ids[k] = e_best;
    w[k] = __shfl_sync(0xffffffffu, mine, e_best % 32);
    sum += w[k];
  }
  const float denom = NORM ? sum + 1e-20f : 1.f;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) w[k] = w[k] / denom * routed_scaling;
}

template <int E, int TOPK, int N_GROUP, int TOPK_GROUP, int NORM, int WARPS>
__device__ void moe_router(const void* logits, const void* bias, void* topk_ids,
                           void* topk_weights, int n_tokens, float routed_scaling) {
  __shared__ float choice_smem[N_GROUP > 1 ? WARPS : 1][N_GROUP > 1 ? E : 1];  // the group scores' input
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = blockIdx.x * WARPS + warp;
  if (t >= n_tokens) return;
  int ids[TOPK];
  float w[TOPK];
  moe_route_token<E, TOPK, N_GROUP, TOPK_GROUP, NORM>(static_cast<const float*>(logits) + static_cast<i64>(t) * E,
                                                       static_cast<const float*>(bias), choice_smem[N_GROUP > 1 ? warp : 0],
                                                       routed_scaling, ids, w);
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < TOPK; ++k) {
      static_cast<int*>(topk_ids)[static_cast<i64>(t) * TOPK + k] = ids[k];
      static_cast<float*>(topk_weights)[static_cast<i64>(t) * TOPK + k] = w[k];
    }
  }
}

}  // namespace kp
