#pragma once
// Builds the naive IR of a model from its config and tensor specs (ir/OPS.md "Functions the
// builder makes"): @target (one step), @target_commit (keep accepted KV entries), and with a
// drafter @draft_context (context K/V) and @draft (one propose). MLA is built as transformers
// does it (kv_b_proj expands the latent cache per head); the mla-absorb pass rewrites it.
#include <memory>
#include <optional>
#include <vector>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"
#include "compiler/frontend/tensor_spec.h"
#include "ir/attr.h"
#include "ir/ir.h"

namespace kplan {

struct BuildOptions {
  // @target takes %tree_mask u32[T, W] (ancestor bitmask); false: causal attention, no mask.
  bool tree_mask = true;
  // Decoder layers whose outputs @target returns as "hidden.L". Unset: the drafter's
  // target_layer_ids when a drafter is given, else none.
  std::optional<std::vector<int64_t>> capture_layers;
  // @target also returns "next_tokens" i32[T], the argmax of its logits, so greedy token
  // selection can run on the device (the plan's TokenIds output) instead of copying logits.
  bool next_tokens = true;
  // @draft also returns the top `draft_top_k` draft log-probabilities and ids of each depth (the
  // DDTree builder's candidates, selected on the device); at most the vocabulary, 0: none. A
  // tree of budget n needs n per depth, so compile sets it to its largest bucket - 1.
  int64_t draft_top_k = 63;
};

struct DraftInput {
  const DraftConfig* config = nullptr;
  const std::vector<TensorSpec>* specs = nullptr;
};

// `target_specs` (and the drafter's) give every weight's name, dtype and shape; a tensor the
// builder needs that is not in them is an error naming it.
std::unique_ptr<ir::Module> build_module(const ModelConfig& target,
                                         const std::vector<TensorSpec>& target_specs,
                                         const DraftInput& draft = {},
                                         const BuildOptions& options = {});

// Convenience: specs from target_tensor_specs / draft_tensor_specs.
std::unique_ptr<ir::Module> build_module(const ModelConfig& target, const DraftConfig* draft,
                                         const BuildOptions& options = {});

// rope op attributes (ir/OPS.md "rope") for a theta and rope_scaling; attention_factor computed
// as transformers' _compute_yarn_parameters does.
ir::Attrs rope_attrs(double theta, const RopeScaling& scaling, bool interleaved);

}  // namespace kplan
