#include "runtime/cpu/cpu_target.h"

#include <numeric>
#include <string>

#include "ir/support/error.h"
#include "runtime/cpu/step_mask.h"

namespace kplan::cpu {

namespace {

CompileResult compile_target(const std::filesystem::path& dir) {
  CompileOptions options;
  options.model = dir;
  options.build.tree_mask = true;
  // Every layer's output is an output of @target, so capture layers can change at run time.
  ModelConfig config = load_model_config(dir / "config.json");
  std::vector<int64_t> all(static_cast<size_t>(config.num_hidden_layers));
  std::iota(all.begin(), all.end(), 0);
  options.build.capture_layers = all;
  return compile_to_ir(options);
}

Matrix to_matrix(const Tensor& t) {
  Matrix m;
  m.rows = t.shape.at(0);
  m.cols = t.shape.at(1);
  m.data = t.f;
  return m;
}

}  // namespace

CpuTarget::CpuTarget(const std::filesystem::path& checkpoint_dir, int64_t max_context)
    : checkpoint_dir_(checkpoint_dir), compiled_(compile_target(checkpoint_dir)) {
  const ModelConfig& c = config();
  if (max_context < 0) throw Error("max context must not be negative, got " + std::to_string(max_context));
  max_context_ = max_context > 0 ? max_context : c.max_position_embeddings;
  const CheckpointSources sources = {{"target", &compiled_.target->weights()}};
  step_ = std::make_unique<Interpreter>(function_named(*compiled_.module, "target"), sources);
  commit_ = std::make_unique<Interpreter>(function_named(*compiled_.module, "target_commit"), sources);
  reset();
}

void CpuTarget::reset() {
  const ModelConfig& c = config();
  const int64_t row = c.kv_lora_rank + c.qk_rope_head_dim;
  kv_.assign(static_cast<size_t>(c.num_hidden_layers), std::make_shared<Tensor>(Tensor::floats({0, row})));
  kv_step_.assign(kv_.size(), nullptr);
  committed_ = 0;
  pending_ = 0;
}

void CpuTarget::set_capture_layers(std::vector<int64_t> layer_ids) {
  for (int64_t id : layer_ids)
    if (id < 0 || id >= config().num_hidden_layers)
      throw Error("capture layer " + std::to_string(id) + " is not a decoder layer (the target has " +
                  std::to_string(config().num_hidden_layers) + ")");
  capture_layers_ = std::move(layer_ids);
}

StepOutput CpuTarget::forward(const StepInput& in) {
  const int64_t T = static_cast<int64_t>(in.tokens.size());
  if (T == 0) throw Error("forward: a step needs at least one token (empty prompt?)");
  if (in.positions.size() != in.tokens.size())
    throw Error("forward: " + std::to_string(in.positions.size()) + " position ids for " +
                std::to_string(T) + " tokens");
  const int64_t words = mask_words(T);
  if (!in.tree_mask.empty() && static_cast<int64_t>(in.tree_mask.size()) != T * words)
    throw Error("forward: tree mask has " + std::to_string(in.tree_mask.size()) + " words, expected " +
                std::to_string(T * words) + " for " + std::to_string(T) + " tokens");
  for (int32_t p : in.positions)
    if (p < 0) throw Error("forward: negative position id " + std::to_string(p));
  if (committed_ + T > max_context_)
    throw Error("context full: " + std::to_string(committed_) + " cached + " + std::to_string(T) +
                " new tokens exceed the maximum context of " + std::to_string(max_context_));

  // An empty mask means causal; @target always takes one.
  std::vector<int32_t> mask(static_cast<size_t>(T * words), 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (step_mask_allows(in.tree_mask, T, i, j)) mask[i * words + j / 32] |= static_cast<int32_t>(1u << (j % 32));

  std::map<std::string, TensorPtr> args;
  args["tokens"] = int_tensor({T}, in.tokens);
  args["positions"] = int_tensor({T}, in.positions);
  args["tree_mask"] = int_tensor({T, words}, std::move(mask));
  for (size_t l = 0; l < kv_.size(); ++l) args["kv." + std::to_string(l)] = kv_[l];
  auto out = step_->run(args);

  for (size_t l = 0; l < kv_.size(); ++l) kv_step_[l] = out.at("kv_step." + std::to_string(l));
  pending_ = T;
  StepOutput result;
  result.logits = to_matrix(*out.at("logits"));
  for (int64_t id : capture_layers_) result.captured.push_back(to_matrix(*out.at("hidden." + std::to_string(id))));
  return result;
}

void CpuTarget::commit(std::span<const int32_t> keep) {
  std::vector<bool> seen(static_cast<size_t>(pending_), false);
  for (int32_t k : keep) {
    if (k < 0 || k >= pending_ || seen[k])
      throw Error("commit: step index " + std::to_string(k) + " is not a distinct pending entry (" +
                  std::to_string(pending_) + " pending)");
    seen[k] = true;
  }
  if (!keep.empty()) {
    std::map<std::string, TensorPtr> args;
    args["keep"] = int_tensor({static_cast<int64_t>(keep.size())}, {keep.begin(), keep.end()});
    for (size_t l = 0; l < kv_.size(); ++l) {
      args["kv." + std::to_string(l)] = kv_[l];
      args["kv_step." + std::to_string(l)] = kv_step_[l];
    }
    auto out = commit_->run(args);
    for (size_t l = 0; l < kv_.size(); ++l) kv_[l] = out.at("kv." + std::to_string(l));
  }
  committed_ += static_cast<int64_t>(keep.size());
  pending_ = 0;
  kv_step_.assign(kv_.size(), nullptr);
}

}  // namespace kplan::cpu
