#include "runtime/cpu/cpu_target.h"

#include <string>

#include "ir/support/error.h"
#include "ir/support/tree_mask.h"
#include "runtime/cpu/plan_ir.h"

namespace kplan::cpu {

namespace {

Matrix to_matrix(const Tensor& t) {
  Matrix m;
  m.rows = t.shape.at(0);
  m.cols = t.shape.at(1);
  m.data = t.f;
  return m;
}

}  // namespace

CpuTarget::CpuTarget(std::shared_ptr<const plan::Plan> plan, const std::string& source, int64_t max_context,
                     std::shared_ptr<const WeightTable> shared)
    : plan_(std::move(plan)), source_(source), module_(parse_plan_ir(*plan_, source)) {
  if (max_context < 0) throw Error("max context must not be negative, got " + std::to_string(max_context));
  max_context_ = max_context > 0                           ? max_context
                 : plan_->header.limits.max_context > 0 ? plan_->header.limits.max_context
                                                         : config().max_position_embeddings;
  if (!shared) shared = std::make_shared<const WeightTable>(plan_->weights, source);
  const WeightTable& weights = *shared;
  const ir::Function& step = function_named(*module_, "target");
  step_ = std::make_unique<Interpreter>(step, weights);
  commit_ = std::make_unique<Interpreter>(function_named(*module_, "target_commit"), weights);
  takes_tree_mask_ = step.arg("tree_mask") != nullptr;
  for (int64_t l = 0; l < config().num_hidden_layers; ++l)
    if (step.output_value("hidden." + std::to_string(l))) capturable_.insert(l);
  const ir::Value* kv0 = step.arg("kv.0");
  if (!kv0 || kv0->type().rank() != 2)
    throw Error(source + ": the plan's @target takes no [S, row] KV cache argument %kv.0");
  kv_row_ = kv0->type().shape[1].constant;
  reset();
}

void CpuTarget::reset() {
  kv_.assign(static_cast<size_t>(config().num_hidden_layers), std::make_shared<Tensor>(Tensor::floats({0, kv_row_})));
  kv_step_.assign(kv_.size(), nullptr);
  committed_ = 0;
  pending_ = 0;
}

void CpuTarget::set_capture_layers(std::vector<int64_t> layer_ids) {
  for (int64_t id : layer_ids) {
    if (id < 0 || id >= config().num_hidden_layers)
      throw Error("capture layer " + std::to_string(id) + " is not a decoder layer (the target has " +
                  std::to_string(config().num_hidden_layers) + ")");
    if (!capturable_.count(id)) {
      std::string have;
      for (int64_t l : capturable_) have += (have.empty() ? "" : ", ") + std::to_string(l);
      throw Error(source_ + ": the plan's @target does not return layer " + std::to_string(id) +
                  "'s output (it returns layers: " + (have.empty() ? "none" : have) + ")");
    }
  }
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

  // An empty mask means causal.
  const std::vector<uint32_t> mask = in.tree_mask.empty() ? causal_mask(T) : in.tree_mask;
  std::map<std::string, TensorPtr> args;
  args["tokens"] = int_tensor({T}, in.tokens);
  args["positions"] = int_tensor({T}, in.positions);
  if (takes_tree_mask_)
    args["tree_mask"] = int_tensor({T, words}, std::vector<int32_t>(mask.begin(), mask.end()));
  else if (mask != causal_mask(T))
    throw Error(source_ + ": the plan's @target is causal (compiled without a tree mask): it cannot run a tree step");
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
