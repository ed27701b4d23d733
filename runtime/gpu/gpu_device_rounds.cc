#include "runtime/gpu/gpu_device_rounds.h"

#include <algorithm>
#include <cstring>

#include "ir/support/error.h"

namespace kplan::gpu {
namespace {

// kernels_templates/ddtree_round.cuh's round state.
enum Word : int {
  kBonus = 0, kCacheLength = 1, kBudget = 2, kTopK = 3, kMaxDepth = 4, kRemaining = 5, kMaxContext = 6,
  kNodes = 7, kAccepted = 8, kRounds = 9, kBuild = 10, kScored = 11, kYield = 16
};

const plan::StepOutput* round_state(const plan::Bucket& walk) {
  for (const plan::StepOutput& o : walk.outputs)
    if (o.kind == plan::OutputKind::RoundState) return &o;
  return nullptr;
}

}  // namespace

std::vector<const plan::Bucket*> GpuDeviceRounds::chain_for(const plan::Plan& p, int64_t verify_tokens) {
  if (verify_tokens < 2 || !p.draft) return {};
  const plan::Bucket* verify = p.bucket_for("target", verify_tokens);
  if (!verify) return {};
  const uint32_t t = verify->tokens;
  const plan::Bucket* draft = p.bucket_for("draft", p.draft->block_size);
  const plan::Bucket* inputs = p.bucket_for("round_draft_inputs", 1);
  const plan::Bucket* tree = p.bucket_for("round_tree", t);
  const plan::Bucket* context = p.bucket_for("draft_context", t);
  const plan::Bucket* walk = p.bucket_for("round_walk", t);
  const plan::Bucket* commit = p.bucket_for("target_commit", 1);
  const plan::Bucket* draft_commit = p.bucket_for("draft_commit", 1);
  const std::vector<const plan::Bucket*> chain = {inputs, draft, tree, verify, context, walk, commit, draft_commit};
  for (const plan::Bucket* b : chain)
    if (!b) return {};
  if (tree->tokens != t || context->tokens != t || walk->tokens != t || !round_state(*walk)) return {};
  return chain;
}

bool GpuDeviceRounds::available(const plan::Plan& p, int64_t verify_tokens) { return !chain_for(p, verify_tokens).empty(); }

void GpuDeviceRounds::prepare_all(GpuTargetModel& target) {
  GpuExecutor& exec = target.executor();
  const plan::Plan& p = exec.plan();
  for (const plan::Bucket& b : p.buckets) {
    if (b.program != "round_walk") continue;
    const std::vector<const plan::Bucket*> chain = chain_for(p, b.tokens);
    if (!chain.empty()) exec.prepare_chain(chain);
  }
}

GpuDeviceRounds::GpuDeviceRounds(GpuTargetModel& target, int64_t verify_tokens, std::function<void(int64_t)> on_commit)
    : target_(target), exec_(target.executor()), on_commit_(std::move(on_commit)) {
  const std::vector<const plan::Bucket*>& c = chain(verify_tokens);
  max_tokens_ = c[3]->tokens;
  state_ = round_state(*c[5]);
  for (const plan::Bucket& b : exec_.plan().buckets)
    if (b.program == "round_walk") largest_ = std::max<int64_t>(largest_, b.tokens);
  if (state_->cols != 16 + 2 * largest_ + 1)
    throw Error(exec_.model().source() + ": invalid plan: the round state has " + std::to_string(state_->cols) +
                " words for verify buckets of up to " + std::to_string(largest_) + " tokens");
  words_.assign(static_cast<size_t>(state_->cols), 0);
}

const std::vector<const plan::Bucket*>& GpuDeviceRounds::chain(int64_t verify_tokens) {
  const plan::Bucket* verify = exec_.plan().bucket_for("target", verify_tokens);
  const int64_t t = verify ? verify->tokens : verify_tokens;
  auto it = chains_.find(t);
  if (it == chains_.end()) {
    std::vector<const plan::Bucket*> c = chain_for(exec_.plan(), verify_tokens);
    if (c.empty())
      throw Error(exec_.model().source() + ": the plan has no device round for a verify of " + std::to_string(verify_tokens) +
                  " tokens (recompile it with --draft DIR)");
    it = chains_.emplace(t, std::move(c)).first;
  }
  return it->second;
}

void GpuDeviceRounds::begin(int32_t bonus, int64_t budget, bool single_path, int64_t remaining, int64_t build) {
  max_budget_ = std::max(budget, build);
  if (budget < 1 || max_budget_ > max_tokens_ - 1)
    throw Error("device rounds: a budget of " + std::to_string(max_budget_) + " nodes does not fit the verify bucket of " +
                std::to_string(max_tokens_) + " tokens");
  std::fill(words_.begin(), words_.end(), 0);
  words_[kBonus] = bonus;
  words_[kCacheLength] = static_cast<int32_t>(target_.cache_length());
  words_[kBudget] = static_cast<int32_t>(budget);
  words_[kTopK] = single_path ? 1 : 0;
  words_[kMaxDepth] = static_cast<int32_t>(exec_.plan().draft->block_size - 1);
  words_[kRemaining] = static_cast<int32_t>(std::min<int64_t>(remaining, INT32_MAX));
  words_[kMaxContext] = static_cast<int32_t>(target_.max_context());
  words_[kBuild] = static_cast<int32_t>(build);
  exec_.write_slot(state_->slot, state_->offset, words_.data(), words_.size() * 4);
}

RoundYield GpuDeviceRounds::round(int64_t budget) {
  if (budget < 1 || budget > max_budget_)
    throw Error("device rounds: a round of " + std::to_string(budget) + " nodes past the " + std::to_string(max_budget_) +
                " the rounds began with");
  const std::vector<const plan::Bucket*>& c = chain(budget + 1);
  if (budget != words_[kBudget]) {
    const int32_t word = static_cast<int32_t>(budget);
    exec_.write_slot(state_->slot, state_->offset + 4 * kBudget, &word, 4, /*wait=*/false);
  }
  exec_.launch_chain(c);
  const GpuExecutor::RawRead read[] = {{state_, 1, words_.data()}};
  exec_.read_raw(read);  // the one wait of the round
  RoundYield y;
  y.nodes = words_[kNodes];
  const int64_t accepted = words_[kAccepted], scored = words_[kScored];
  if (y.nodes < 1 || y.nodes > c[3]->tokens || accepted < 1 || accepted > y.nodes || scored < y.nodes - 1 ||
      scored > largest_ - 1 || words_[kBudget] != budget || words_[kCacheLength] != target_.cache_length() + accepted)
    throw Error(exec_.model().source() + ": a device round returned an inconsistent state (" + std::to_string(y.nodes) +
                " nodes, " + std::to_string(accepted) + " accepted, cache length " + std::to_string(words_[kCacheLength]) + ")");
  y.tokens.assign(words_.begin() + kYield, words_.begin() + kYield + accepted);
  y.path_log_probs.assign(1, 0.0);
  const int32_t* scores = words_.data() + kYield + largest_ + 1;
  for (int64_t i = 0; i < scored; ++i) {
    float f;
    std::memcpy(&f, scores + i, 4);
    y.path_log_probs.push_back(f);
  }
  target_.committed_on_device(accepted);
  if (on_commit_) on_commit_(accepted);
  return y;
}

}  // namespace kplan::gpu
