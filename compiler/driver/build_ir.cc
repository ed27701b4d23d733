#include "compiler/driver/build_ir.h"

#include <algorithm>
#include <cmath>

#include "compiler/driver/build_parts.h"
#include "ir/support/error.h"
#include "ir/support/yarn.h"

namespace kplan {

ir::Attrs rope_attrs(double theta, const RopeScaling& s, bool interleaved) {
  ir::Attrs a;
  a.set("theta", theta);
  a.set("interleaved", interleaved);
  if (s.type == "yarn") {
    a.set("scaling", std::string("yarn"));
    a.set("factor", s.factor);
    a.set("original_max_position_embeddings", s.original_max_position_embeddings);
    a.set("beta_fast", s.beta_fast);
    a.set("beta_slow", s.beta_slow);
    // The config's explicit attention_factor wins (transformers' _compute_yarn_parameters).
    a.set("attention_factor", s.attention_factor ? *s.attention_factor
                                                 : yarn::attention_factor(s.factor, s.mscale, s.mscale_all_dim));
  } else if (s.type == "none") {
    a.set("scaling", std::string("none"));
    a.set("attention_factor", 1.0);
  } else {
    throw Error("IR builder: unsupported rope scaling '" + s.type + "'");
  }
  return a;
}

std::unique_ptr<ir::Module> build_module(const ModelConfig& target,
                                         const std::vector<TensorSpec>& target_specs,
                                         const DraftInput& draft, const BuildOptions& options) {
  auto m = std::make_unique<ir::Module>();
  m->attrs().set("model_type", target.model_type);
  m->attrs().set("num_hidden_layers", target.num_hidden_layers);
  m->attrs().set("hidden_size", target.hidden_size);
  m->attrs().set("vocab_size", target.vocab_size);
  m->attrs().set("max_position_embeddings", target.max_position_embeddings);
  if (draft.config) {
    m->attrs().set("draft_layers", draft.config->num_hidden_layers);
    m->attrs().set("block_size", draft.config->block_size);
    m->attrs().set("mask_token_id", draft.config->mask_token_id);
  }

  std::vector<int64_t> capture;
  if (options.capture_layers)
    capture = *options.capture_layers;
  else if (draft.config)
    capture = draft.config->target_layer_ids;
  std::sort(capture.begin(), capture.end());
  capture.erase(std::unique(capture.begin(), capture.end()), capture.end());

  WeightTable target_w(target_specs, "target", target.quant.group_size);
  build_target(target, target_w, options, capture, *m);
  if (draft.config) {
    if (!draft.specs) throw Error("IR builder: drafter given without its tensor specs");
    WeightTable draft_w(*draft.specs, "draft", target.quant.group_size);
    build_draft(*draft.config, target, draft_w, target_w, options.draft_top_k, *m);
  }
  return m;
}

std::unique_ptr<ir::Module> build_module(const ModelConfig& target, const DraftConfig* draft,
                                         const BuildOptions& options) {
  std::vector<TensorSpec> specs = target_tensor_specs(target);
  std::vector<TensorSpec> draft_specs;
  if (draft) draft_specs = draft_tensor_specs(*draft);
  return build_module(target, specs, DraftInput{draft, draft ? &draft_specs : nullptr}, options);
}

}  // namespace kplan
