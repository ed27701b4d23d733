#include "runtime/gpu/gpu_target_model.h"

#include <algorithm>

#include "ir/support/error.h"

namespace kplan::gpu {

GpuTargetModel::GpuTargetModel(std::shared_ptr<const plan::Plan> plan, std::string source,
                               GpuExecutor::Options options)
    : GpuTargetModel(std::make_shared<const GpuModel>(std::move(plan), std::move(source)), options) {}

GpuTargetModel::GpuTargetModel(std::shared_ptr<const GpuModel> model, GpuExecutor::Options options)
    : executor_(std::move(model), options), source_(executor_.model().source()) {
  const plan::Plan& p = executor_.plan();
  const ModelConfig& config = p.model;
  max_context_ = p.header.limits.max_context;
  // A step padded up to its bucket also appends KV rows for the padding; the kernels write none
  // past the cache (kv_cache.cuh) and the attention never stages a key its token does not see
  // (mla_split.cuh). The last row stays out of use, as when padding was clamped onto it.
  for (const plan::KvCache& kv : p.kv_caches) max_context_ = std::min<int64_t>(max_context_, kv.rows - 1);
  for (const plan::Bucket& b : p.buckets)
    for (const plan::StepOutput& o : b.outputs)
      if (o.kind == plan::OutputKind::Logits && b.program == "target" && o.cols != config.vocab_size)
        throw Error(source_ + ": invalid plan: bucket target/" + std::to_string(b.tokens) + " has " +
                    std::to_string(o.cols) + " logits per token for a vocabulary of " +
                    std::to_string(config.vocab_size));
  if (!p.bucket_for("target", 1))
    throw Error(source_ + ": the plan has no target bucket to run (recompile it)");
  for (const plan::Bucket& b : p.buckets)
    if (b.program == "target") max_step_tokens_ = std::max<int64_t>(max_step_tokens_, b.tokens);
}

StepInputs GpuTargetModel::step_inputs_for(const StepInput& in, const plan::Bucket& bucket) const {
  const int64_t t = static_cast<int64_t>(in.tokens.size());
  const int64_t bt = bucket.tokens;
  const int64_t words = (bt + 31) / 32;
  const int64_t in_words = (t + 31) / 32;
  StepInputs s;
  s.tokens.assign(static_cast<size_t>(bt), 0);
  s.positions.assign(static_cast<size_t>(bt), 0);
  std::copy(in.tokens.begin(), in.tokens.end(), s.tokens.begin());
  std::copy(in.positions.begin(), in.positions.end(), s.positions.begin());
  // Padding rows repeat the last real position and attend only themselves, so every softmax row
  // has at least one key and padded work stays finite.
  for (int64_t i = t; i < bt; ++i) s.positions[static_cast<size_t>(i)] = t ? in.positions[static_cast<size_t>(t - 1)] : 0;
  s.tree_mask.assign(static_cast<size_t>(bt * words), 0u);
  for (int64_t i = 0; i < bt; ++i) {
    uint32_t* row = s.tree_mask.data() + i * words;
    if (i >= t) {
      row[i / 32] |= 1u << (i % 32);
    } else if (in.tree_mask.empty()) {
      for (int64_t j = 0; j <= i; ++j) row[j / 32] |= 1u << (j % 32);
    } else {
      for (int64_t w = 0; w < in_words; ++w) row[w] = in.tree_mask[static_cast<size_t>(i * in_words + w)];
    }
  }
  s.cache_length = static_cast<int32_t>(cache_length_);
  s.token_count = static_cast<int32_t>(t);
  return s;
}

StepOutput GpuTargetModel::forward(const StepInput& in) {
  const int64_t t = static_cast<int64_t>(in.tokens.size());
  if (t == 0) throw Error(source_ + ": a step needs at least one token");
  if (in.positions.size() != in.tokens.size())
    throw Error(source_ + ": a step has " + std::to_string(in.tokens.size()) + " tokens but " +
                std::to_string(in.positions.size()) + " positions");
  if (!in.tree_mask.empty() && in.tree_mask.size() != static_cast<size_t>(t * ((t + 31) / 32)))
    throw Error(source_ + ": the tree mask has " + std::to_string(in.tree_mask.size()) + " words for " +
                std::to_string(t) + " tokens");
  const plan::Plan& p = executor_.plan();
  const plan::Bucket* bucket = p.bucket_for("target", t);
  if (!bucket)
    throw Error(source_ + ": a step of " + std::to_string(t) + " tokens exceeds the plan's largest bucket (" +
                std::to_string(p.header.limits.max_tokens_per_step) + " tokens)");
  if (cache_length_ + t > max_context_)
    throw Error(source_ + ": the context would reach " + std::to_string(cache_length_ + t) +
                " positions; the plan holds " + std::to_string(max_context_));
  for (int32_t tok : in.tokens)
    if (tok < 0 || tok >= config().vocab_size)
      throw Error(source_ + ": token id " + std::to_string(tok) + " is outside the vocabulary");

  if (step_follower_.empty()) {
    executor_.run(*bucket, step_inputs_for(in, *bucket));
  } else {
    const plan::Bucket* chain[] = {bucket, p.bucket_for(step_follower_, bucket->tokens)};
    executor_.run_chain(chain, step_inputs_for(in, *bucket));
  }
  pending_ = t;

  StepOutput out;
  const plan::StepOutput* logits = nullptr;
  const plan::StepOutput* ids = nullptr;
  for (const plan::StepOutput& o : bucket->outputs) {
    if (o.kind == plan::OutputKind::Logits) logits = &o;
    if (o.kind == plan::OutputKind::TokenIds) ids = &o;
  }
  if (ids) {
    out.token_ids.resize(static_cast<size_t>(t));
    executor_.read_ids(*ids, t, out.token_ids.data());
    // The argmax kernel marks a row whose logits are not all finite with -1 (as the CPU
    // reference refuses such a row).
    for (int64_t r = 0; r < t; ++r)
      if (out.token_ids[static_cast<size_t>(r)] < 0)
        throw Error(source_ + ": the logits of step row " + std::to_string(r) +
                    " are not finite: the activations overflowed or a weight is damaged");
  }
  // Token selection on the device: a greedy step reads back only the ids, not [T, vocab] logits.
  if (!(in.ids_only && ids)) {
    if (!logits) throw Error(source_ + ": bucket target/" + std::to_string(bucket->tokens) + " has no logits output");
    out.logits = Matrix(t, logits->cols);
    executor_.read_output(*logits, t, out.logits.data.data());
  }
  for (int64_t layer : capture_layers_) {
    for (const plan::StepOutput& o : bucket->outputs) {
      if (o.kind != plan::OutputKind::Hidden || o.layer != layer) continue;
      Matrix m(t, o.cols);
      executor_.read_output(o, t, m.data.data());
      out.captured.push_back(std::move(m));
    }
  }
  return out;
}

void GpuTargetModel::commit(std::span<const int32_t> keep) {
  if (static_cast<int64_t>(keep.size()) > pending_)
    throw Error(source_ + ": commit keeps " + std::to_string(keep.size()) + " entries of a " +
                std::to_string(pending_) + "-token step");
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i] < 0 || keep[i] >= pending_ || (i && keep[i] <= keep[i - 1]))
      throw Error(source_ + ": commit indices must be increasing step indices below " + std::to_string(pending_));
  executor_.commit_kv(cache_length_, keep, commit_follower_);
  cache_length_ += static_cast<int64_t>(keep.size());
  pending_ = 0;
}

std::vector<double> GpuTargetModel::step_costs() {
  if (!step_costs_.empty()) return step_costs_;
  const plan::Plan& p = executor_.plan();
  std::vector<double> costs(static_cast<size_t>(max_step_tokens_) + 1, 0.0);
  for (int64_t t = 1; t <= max_step_tokens_; ++t) {
    const plan::Bucket* bucket = p.bucket_for("target", t);
    if (bucket->tokens != t && costs[bucket->tokens] > 0) {  // timed already, at its own size
      costs[static_cast<size_t>(t)] = costs[bucket->tokens];
      continue;
    }
    std::vector<float> ms = executor_.time_bucket(*bucket, 2, 9);
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    costs[static_cast<size_t>(t)] = ms[ms.size() / 2] * 1e-3;
    if (bucket->tokens != t) costs[bucket->tokens] = costs[static_cast<size_t>(t)];
  }
  // The replays wrote pending rows and outputs only: nothing committed changed.
  step_costs_ = costs;
  return step_costs_;
}

void GpuTargetModel::set_followers(const std::string& step, const std::string& commit) {
  const plan::Plan& p = executor_.plan();
  if (!step.empty())
    for (const plan::Bucket& b : p.buckets)
      if (b.program == "target") {
        const plan::Bucket* f = p.bucket_for(step, b.tokens);
        if (!f || f->tokens != b.tokens)
          throw Error(source_ + ": invalid plan: no " + step + " bucket of " + std::to_string(b.tokens) + " tokens to follow target/" +
                      std::to_string(b.tokens));
      }
  const plan::Bucket* c = commit.empty() ? nullptr : p.bucket_for(commit, 1);
  if (!commit.empty() && !c) throw Error(source_ + ": invalid plan: no " + commit + " bucket");
  step_follower_ = step;
  commit_follower_ = c;
}

void GpuTargetModel::prepare_followers(const std::string& step, const std::string& commit) {
  const plan::Plan& p = executor_.plan();
  const plan::Bucket* c = commit.empty() ? nullptr : p.bucket_for(commit, 1);
  for (const plan::Bucket& b : p.buckets) {
    const plan::Bucket* chain[] = {&b, nullptr};
    if (b.program == "target" && !step.empty()) chain[1] = p.bucket_for(step, b.tokens);
    if (b.program == "target_commit") chain[1] = c;
    if (chain[1] && chain[1]->tokens == b.tokens) executor_.prepare_chain(chain);
  }
}

void GpuTargetModel::committed_on_device(int64_t kept) {
  if (kept < 1 || cache_length_ + kept > max_context_)
    throw Error(source_ + ": a device round committed " + std::to_string(kept) + " tokens at cache length " +
                std::to_string(cache_length_) + " of " + std::to_string(max_context_));
  cache_length_ += kept;
  pending_ = 0;
}

void GpuTargetModel::reset() {
  cache_length_ = 0;
  pending_ = 0;
}

void GpuTargetModel::set_capture_layers(std::vector<int64_t> layer_ids) {
  const plan::Plan& p = executor_.plan();
  for (int64_t layer : layer_ids)
    for (const plan::Bucket& b : p.buckets) {
      if (b.program != "target") continue;
      bool found = false;
      for (const plan::StepOutput& o : b.outputs) found |= o.kind == plan::OutputKind::Hidden && o.layer == layer;
      if (!found)
        throw Error(source_ + ": the plan does not capture the output of layer " + std::to_string(layer) +
                    " (compile it with the drafter that needs it: --draft DIR)");
    }
  capture_layers_ = std::move(layer_ids);
}

}  // namespace kplan::gpu
