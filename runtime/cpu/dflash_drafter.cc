#include "runtime/cpu/dflash_drafter.h"

#include <string>

#include "ir/support/error.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/plan_ir.h"

namespace kplan::cpu {

namespace {

const plan::Plan& with_drafter(const std::shared_ptr<const plan::Plan>& plan, const std::string& source) {
  if (!plan) throw Error(source + ": no plan");
  if (!plan->draft) throw Error(source + ": the plan has no DFlash drafter (compile it with --draft DIR)");
  return *plan;
}

}  // namespace

CpuDFlashDrafter::CpuDFlashDrafter(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                                   std::shared_ptr<const WeightTable> shared)
    : plan_(std::move(plan)), module_(parse_plan_ir(with_drafter(plan_, source), source)) {
  if (!shared) shared = std::make_shared<const WeightTable>(plan_->weights, source);
  const WeightTable& weights = *shared;
  context_ = std::make_unique<Interpreter>(function_named(*module_, "draft_context"), weights);
  draft_ = std::make_unique<Interpreter>(function_named(*module_, "draft"), weights);
  reset();
}

void CpuDFlashDrafter::reset() {
  const DraftConfig& d = config();
  auto empty = std::make_shared<Tensor>(Tensor::floats({0, d.num_key_value_heads * d.head_dim}));
  dk_.assign(static_cast<size_t>(d.num_hidden_layers), empty);
  dv_.assign(dk_.size(), empty);
  context_length_ = 0;
}

void CpuDFlashDrafter::observe(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                               const std::vector<Matrix>& captured) {
  const DraftConfig& d = config();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (positions.size() != tokens.size())
    throw Error("drafter observe: " + std::to_string(positions.size()) + " positions for " +
                std::to_string(n) + " tokens");
  if (captured.size() != d.target_layer_ids.size())
    throw Error("drafter observe: got " + std::to_string(captured.size()) +
                " captured layers, the drafter reads " + std::to_string(d.target_layer_ids.size()));
  if (n == 0) return;
  std::map<std::string, TensorPtr> args;
  for (size_t c = 0; c < captured.size(); ++c) {
    if (captured[c].rows != n || captured[c].cols != d.hidden_size)
      throw Error("drafter observe: captured layer " + std::to_string(d.target_layer_ids[c]) + " is [" +
                  std::to_string(captured[c].rows) + ", " + std::to_string(captured[c].cols) +
                  "], expected [" + std::to_string(n) + ", " + std::to_string(d.hidden_size) + "]");
    auto t = std::make_shared<Tensor>();
    t->shape = {n, d.hidden_size};
    t->f = captured[c].data;
    args["hidden." + std::to_string(d.target_layer_ids[c])] = t;
  }
  args["ctx_positions"] = int_tensor({n}, {positions.begin(), positions.end()});
  for (size_t l = 0; l < dk_.size(); ++l) {
    args["dk." + std::to_string(l)] = dk_[l];
    args["dv." + std::to_string(l)] = dv_[l];
  }
  auto out = context_->run(args);
  for (size_t l = 0; l < dk_.size(); ++l) {
    dk_[l] = out.at("dk." + std::to_string(l));
    dv_[l] = out.at("dv." + std::to_string(l));
  }
  context_length_ += n;
}

std::map<std::string, TensorPtr> CpuDFlashDrafter::run_draft(int32_t bonus_token, int32_t bonus_position) const {
  const DraftConfig& d = config();
  const int64_t B = d.block_size;
  std::vector<int32_t> ids(static_cast<size_t>(B), static_cast<int32_t>(d.mask_token_id));
  ids[0] = bonus_token;
  std::vector<int32_t> positions(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) positions[i] = bonus_position + static_cast<int32_t>(i);
  std::map<std::string, TensorPtr> args;
  args["block_tokens"] = int_tensor({B}, std::move(ids));
  args["block_positions"] = int_tensor({B}, std::move(positions));
  for (size_t l = 0; l < dk_.size(); ++l) {
    args["dk." + std::to_string(l)] = dk_[l];
    args["dv." + std::to_string(l)] = dv_[l];
  }
  return draft_->run(args);
}

namespace {

Matrix as_matrix(const Tensor& t) {
  Matrix m;
  m.rows = t.shape.at(0);
  m.cols = t.shape.at(1);
  m.data = t.f;
  return m;
}

}  // namespace

Matrix CpuDFlashDrafter::depth_logits(int32_t bonus_token, int32_t bonus_position) const {
  return as_matrix(*run_draft(bonus_token, bonus_position).at("logits"));
}

Matrix CpuDFlashDrafter::propose(int32_t bonus_token, int32_t bonus_position) {
  return log_softmax(depth_logits(bonus_token, bonus_position));
}

DepthCandidates CpuDFlashDrafter::propose_top(int32_t bonus_token, int32_t bonus_position, int64_t depth, int64_t k) {
  const auto out = run_draft(bonus_token, bonus_position);
  const auto values = out.find("top_log_probs"), ids = out.find("top_ids");
  // The plan's own selection (what a GPU round reads) when it has enough per depth; plans
  // compiled before @draft returned candidates, or a deeper k, select from the logits here.
  if (values == out.end() || ids == out.end() || values->second->shape.at(1) < k)
    return top_candidates(as_matrix(*out.at("logits")), depth, k);
  const Tensor& v = *values->second;
  return leading_candidates(ids->second->i, v.f, v.shape.at(0), v.shape.at(1), depth, k);
}

}  // namespace kplan::cpu
