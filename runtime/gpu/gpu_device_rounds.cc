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

const plan::BufferSlot* slot_named(const plan::Plan& p, const std::string& name, uint32_t* index = nullptr) {
  for (size_t i = 0; i < p.buffers.slots.size(); ++i)
    if (p.buffers.slots[i].name == name) {
      if (index) *index = static_cast<uint32_t>(i);
      return &p.buffers.slots[i];
    }
  return nullptr;
}

}  // namespace

std::vector<const plan::Bucket*> GpuDeviceRounds::chain_for(const plan::Plan& p, int64_t verify_tokens, bool sampled,
                                                            Part part) {
  if (verify_tokens < 2 || !p.draft) return {};
  const plan::Bucket* verify = p.bucket_for("target", verify_tokens);
  if (!verify) return {};
  const uint32_t t = verify->tokens;
  const plan::Bucket* inputs = p.bucket_for("round_draft_inputs", 1);
  const plan::Bucket* draft = p.bucket_for("draft", p.draft->block_size);
  const plan::Bucket* tree = p.bucket_for("round_tree", t);
  const plan::Bucket* context = p.bucket_for("draft_context", t);
  const plan::Bucket* sample = sampled ? p.bucket_for("round_sample", t) : nullptr;
  const plan::Bucket* walk = p.bucket_for("round_walk", t);
  const plan::Bucket* commit = p.bucket_for("target_commit", 1);
  const plan::Bucket* draft_commit = p.bucket_for("draft_commit", 1);
  std::vector<const plan::Bucket*> chain;
  if (part != Part::kVerify) chain = {inputs, draft};
  if (part != Part::kPropose) {
    chain.insert(chain.end(), {tree, verify, context});
    if (sampled) chain.push_back(sample);
    chain.insert(chain.end(), {walk, commit, draft_commit});
  }
  for (const plan::Bucket* b : chain)
    if (!b) return {};
  if (!tree || tree->tokens != t || !walk || walk->tokens != t || !round_state(*walk) || !context ||
      context->tokens != t || (sample && sample->tokens != t))
    return {};
  if (sampled && !slot_named(p, "round.sample")) return {};
  return chain;
}

bool GpuDeviceRounds::available(const plan::Plan& p, int64_t verify_tokens, bool sampled) {
  return !chain_for(p, verify_tokens, sampled, Part::kWhole).empty();
}

void GpuDeviceRounds::prepare_all(GpuTargetModel& target) {
  GpuExecutor& exec = target.executor();
  const plan::Plan& p = exec.plan();
  bool proposal = false;
  for (const plan::Bucket& b : p.buckets) {
    if (b.program != "round_walk") continue;
    for (bool sampled : {false, true})
      for (Part part : {Part::kWhole, Part::kVerify}) {
        const std::vector<const plan::Bucket*> chain = chain_for(p, b.tokens, sampled, part);
        if (!chain.empty()) exec.prepare_chain(chain);
      }
    if (!proposal) {  // one proposal graph serves every verify size
      const std::vector<const plan::Bucket*> chain = chain_for(p, b.tokens, false, Part::kPropose);
      if (!chain.empty()) exec.prepare_chain(chain);
      proposal = !chain.empty();
    }
  }
}

GpuDeviceRounds::GpuDeviceRounds(GpuTargetModel& target, int64_t verify_tokens, std::function<void(int64_t)> on_commit)
    : target_(target), exec_(target.executor()), on_commit_(std::move(on_commit)) {
  const std::vector<const plan::Bucket*>& c = chain(verify_tokens, Part::kWhole);
  max_tokens_ = c[3]->tokens;
  state_ = round_state(*c[c.size() - 3]);
  for (const plan::Bucket& b : exec_.plan().buckets)
    if (b.program == "round_walk") largest_ = std::max<int64_t>(largest_, b.tokens);
  if (state_->cols != 16 + 2 * largest_ + 1)
    throw Error(exec_.model().source() + ": invalid plan: the round state has " + std::to_string(state_->cols) +
                " words for verify buckets of up to " + std::to_string(largest_) + " tokens");
  slot_named(exec_.plan(), "round.sample", &sample_slot_);
  words_.assign(static_cast<size_t>(state_->cols), 0);
}

const std::vector<const plan::Bucket*>& GpuDeviceRounds::chain(int64_t verify_tokens, Part part) {
  const plan::Bucket* verify = exec_.plan().bucket_for("target", verify_tokens);
  const int64_t t = verify ? verify->tokens : verify_tokens;
  auto it = chains_.find({t, part, sampled_});
  if (it == chains_.end()) {
    std::vector<const plan::Bucket*> c = chain_for(exec_.plan(), verify_tokens, sampled_, part);
    if (c.empty())
      throw Error(exec_.model().source() + ": the plan has no device round for a verify of " + std::to_string(verify_tokens) +
                  " tokens" + (sampled_ ? " at temperature > 0" : "") + " (recompile it with --draft DIR)");
    it = chains_.emplace(std::tuple{t, part, sampled_}, std::move(c)).first;
  }
  return it->second;
}

void GpuDeviceRounds::begin(int32_t bonus, int64_t budget, bool single_path, int64_t remaining,
                            const RoundSampling& sampling) {
  max_budget_ = budget;
  if (budget < 1 || max_budget_ > max_tokens_ - 1)
    throw Error("device rounds: a budget of " + std::to_string(max_budget_) + " nodes does not fit the verify bucket of " +
                std::to_string(max_tokens_) + " tokens");
  sampled_ = sampling.temperature > 0.0;
  if (sampled_) {
    if (!available(exec_.plan(), max_tokens_, true))
      throw Error(exec_.model().source() + ": the plan has no sampled device rounds (recompile it with --draft DIR)");
    // round_sample's parameters: seed, temperature, and the draw base (ir/support/sample_draws.h).
    uint64_t params[3];
    params[0] = sampling.seed;
    std::memcpy(&params[1], &sampling.temperature, 8);
    const int64_t base = static_cast<int64_t>(sampling.next_draw) - target_.cache_length();
    std::memcpy(&params[2], &base, 8);
    exec_.write_slot(sample_slot_, 0, params, sizeof params, /*wait=*/false);
  }
  std::fill(words_.begin(), words_.end(), 0);
  words_[kBonus] = bonus;
  words_[kCacheLength] = static_cast<int32_t>(target_.cache_length());
  words_[kBudget] = static_cast<int32_t>(budget);
  words_[kTopK] = single_path ? 1 : 0;
  words_[kMaxDepth] = static_cast<int32_t>(exec_.plan().draft->block_size - 1);
  words_[kRemaining] = static_cast<int32_t>(std::min<int64_t>(remaining, INT32_MAX));
  words_[kMaxContext] = static_cast<int32_t>(target_.max_context());
  exec_.write_slot(state_->slot, state_->offset, words_.data(), words_.size() * 4);
}

void GpuDeviceRounds::set_word(int word, int32_t value) {
  if (words_[static_cast<size_t>(word)] == value) return;
  words_[static_cast<size_t>(word)] = value;
  exec_.write_slot(state_->slot, state_->offset + 4 * static_cast<uint64_t>(word), &value, 4, /*wait=*/false);
}

RoundYield GpuDeviceRounds::round(int64_t budget) {
  if (budget < 1 || budget > max_budget_)
    throw Error("device rounds: a round of " + std::to_string(budget) + " nodes past the " + std::to_string(max_budget_) +
                " the rounds began with");
  const std::vector<const plan::Bucket*>& c = chain(budget + 1, Part::kWhole);
  set_word(kBudget, static_cast<int32_t>(budget));
  exec_.launch_chain(c);
  return finish(*c[3]);
}

ProposedCandidates GpuDeviceRounds::propose() {
  const std::vector<const plan::Bucket*>& c = chain(max_tokens_, Part::kPropose);
  const plan::StepOutput* log_probs = nullptr;
  for (const plan::StepOutput& o : c[1]->outputs)
    if (o.kind == plan::OutputKind::TopLogProbs) log_probs = &o;
  if (!log_probs) throw Error(exec_.model().source() + ": invalid plan: @draft returns no candidates for a device round");
  exec_.launch_chain(c);
  ProposedCandidates p;
  p.rows = log_probs->rows;
  p.width = log_probs->cols;
  p.log_probs.resize(static_cast<size_t>(p.rows * p.width));
  const GpuExecutor::RawRead read[] = {{log_probs, p.rows, p.log_probs.data()}};
  exec_.read_raw(read);  // the proposal's wait
  return p;
}

RoundYield GpuDeviceRounds::verify(int64_t budget) {
  if (budget < 1 || budget > max_budget_)
    throw Error("device rounds: a verify of " + std::to_string(budget) + " nodes past the " + std::to_string(max_budget_) +
                " the rounds began with");
  const std::vector<const plan::Bucket*>& c = chain(budget + 1, Part::kVerify);
  set_word(kBudget, static_cast<int32_t>(budget));
  exec_.launch_chain(c);
  return finish(*c[1]);
}

RoundYield GpuDeviceRounds::finish(const plan::Bucket& verify_bucket) {
  const int64_t cache_before = target_.cache_length(), budget = words_[kBudget];
  const GpuExecutor::RawRead read[] = {{state_, 1, words_.data()}};
  exec_.read_raw(read);  // the one wait of the round
  RoundYield y;
  y.nodes = words_[kNodes];
  const int64_t accepted = words_[kAccepted], scored = words_[kScored];
  if (y.nodes < 1 || y.nodes > verify_bucket.tokens || accepted < 1 || accepted > y.nodes || scored < y.nodes - 1 ||
      scored > largest_ - 1 || words_[kBudget] != budget || words_[kCacheLength] != cache_before + accepted)
    throw Error(exec_.model().source() + ": a device round returned an inconsistent state (" + std::to_string(y.nodes) +
                " nodes, " + std::to_string(accepted) + " accepted, cache length " + std::to_string(words_[kCacheLength]) + ")");
  y.tokens.assign(words_.begin() + kYield, words_.begin() + kYield + accepted);
  // round_sample marks a row whose logits are not all finite with -1 (the host sampler refuses them).
  const int64_t vocab = target_.config().vocab_size;
  for (int32_t token : y.tokens)
    if (token < 0 || token >= vocab)
      throw Error(token < 0 ? "the target's logits are not finite: the activations overflowed or a weight is damaged"
                            : exec_.model().source() + ": a device round picked token " + std::to_string(token) +
                                  " outside the vocabulary of " + std::to_string(vocab));
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
