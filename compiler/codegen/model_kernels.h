#pragma once
// The kernel instances a model's programs can use (including the fused-accumulate, commit and
// sampling variants the lowering does not emit yet), for CI compile coverage and cache warm-up.
// The per-op constructors (rms_norm_kernel(...), ...) are the families' (families/all.h).
#include <vector>

#include "compiler/codegen/families/all.h"
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

// The target model's instances (prefill, AR decode, tree verify, KV commit, greedy selection),
// without duplicates, in a stable order.
std::vector<KernelSource> target_model_kernels(const ModelConfig& c, const StorageChoice& s);
// The DFlash drafter's instances (its own layers; it shares the target's embedding and lm_head).
// `draft_top_k`: how many candidates per position the DDTree proposer reads from its logits.
std::vector<KernelSource> draft_model_kernels(const DraftConfig& d, const StorageChoice& s, int64_t draft_top_k);

}  // namespace kplan::codegen
