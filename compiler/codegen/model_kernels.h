#pragma once
// Which kernel instance implements each op of a model. The lowering (lower_to_launches.h) picks
// every instance through the per-op functions here; target_model_kernels / draft_model_kernels
// list the instances a model's programs can use (including the fused-accumulate, commit and
// sampling variants the lowering does not emit yet), for CI compile coverage and cache warm-up.
#include <vector>

#include "compiler/codegen/instantiate.h"
#include "compiler/codegen/kernel_instance.h"
#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"

namespace kplan::codegen {

// Storage types the GPU program uses between kernels. Math is always f32. f32 everywhere is
// the default: it matches the CPU reference most closely; bf16 halves activation / cache traffic.
struct StorageChoice {
  ElemType activations = ElemType::F32;
  ElemType kv_cache = ElemType::F32;
};

// Per-op instance choices (dtype codes: 0 f32, 1 bf16).
KernelSource embedding_kernel(int64_t hidden, ElemType out);
KernelSource rms_norm_kernel(int64_t d, ElemType x, ElemType y);
KernelSource matmul_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool weight_kn = false, bool accumulate = false);
KernelSource matmul_int4_kernel(int64_t k, int64_t n, ElemType x, ElemType y, bool accumulate = false);
KernelSource rope_kernel(int64_t rope_dim, int64_t heads, bool interleaved, ElemType x, ElemType y);
KernelSource mla_attention_kernel(int64_t heads, int64_t kv_lora, int64_t rope, ElemType q, ElemType kv, ElemType out);
KernelSource gqa_attention_kernel(int64_t heads, int64_t kv_heads, int64_t head_dim, ElemType q, ElemType kv, ElemType out);
KernelSource kv_append_kernel(int64_t kv_lora, int64_t rope, ElemType src, ElemType kv);
KernelSource kv_compact_kernel(int64_t kv_lora, int64_t rope, ElemType kv);
KernelSource moe_router_kernel(const ModelConfig& c);
KernelSource moe_gate_up_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType x);
KernelSource moe_down_kernel(int64_t hidden, int64_t inter, int64_t top_k, bool int4, ElemType y, bool accumulate);
KernelSource swiglu_kernel(int64_t width, ElemType gate, ElemType up, ElemType out);
KernelSource add_kernel(int64_t d, ElemType a, ElemType b, ElemType out);
KernelSource copy_rows_kernel(int64_t cols, ElemType x, ElemType y);
KernelSource argmax_kernel(int64_t vocab, ElemType logits);
KernelSource topk_kernel(int64_t vocab, int64_t k, ElemType logits, bool log_probs);

// The target model's instances (prefill, AR decode, tree verify, KV commit, greedy selection),
// without duplicates, in a stable order.
std::vector<KernelSource> target_model_kernels(const ModelConfig& c, const StorageChoice& s);
// The DFlash drafter's instances (its own layers; it shares the target's embedding and lm_head).
// `draft_top_k`: how many candidates per position the DDTree proposer reads from its logits.
std::vector<KernelSource> draft_model_kernels(const DraftConfig& d, const StorageChoice& s, int64_t draft_top_k);

}  // namespace kplan::codegen
