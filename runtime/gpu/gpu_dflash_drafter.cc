#include "runtime/gpu/gpu_dflash_drafter.h"

#include <algorithm>

#include "ir/support/error.h"
#include "runtime/ddtree/log_softmax.h"

namespace kplan::gpu {

GpuDFlashDrafter::GpuDFlashDrafter(GpuTargetModel& target) : target_(target), exec_(target.executor()) {
  const plan::Plan& p = exec_.plan();
  const std::string& source = exec_.model().source();
  if (!p.draft) throw Error(source + ": the plan has no DFlash drafter (compile it with --draft DIR)");
  block_size_ = p.draft->block_size;
  mask_token_ = static_cast<int32_t>(p.draft->mask_token_id);
  draft_ = p.bucket_for("draft", block_size_);
  if (!draft_ || draft_->tokens != static_cast<uint32_t>(block_size_) || !p.bucket_for("draft_commit", 1) ||
      !p.bucket_for("draft_context", 1))
    throw Error(source + ": the plan's drafter has no GPU programs (it was compiled before the drafter ran on the GPU: "
                         "recompile it with --draft DIR)");
  if (!draft_output(plan::OutputKind::Logits)) throw Error(source + ": invalid plan: @draft has no logits output");
  // The context step and the commit ride in the target's own graphs: same inputs, no host work.
  target_.set_followers("draft_context", "draft_commit");
}

GpuDFlashDrafter::~GpuDFlashDrafter() { target_.set_followers("", ""); }

void GpuDFlashDrafter::observe(std::span<const int32_t>, std::span<const int32_t>, const std::vector<Matrix>&) {
  throw Error("the GPU drafter reads the target's features on the device: feed it target steps (observe_step)");
}

void GpuDFlashDrafter::observe_step(const StepInput& step, const StepOutput&, std::span<const int32_t> rows) {
  const int64_t t = static_cast<int64_t>(step.tokens.size());
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || rows[i] >= t || (i && rows[i] <= rows[i - 1]))
      throw Error("GPU drafter: committed rows must be increasing indices into the " + std::to_string(t) + "-token step");
  // The work is done already: @draft_context ran in the step's graph over every row of it, and
  // @draft_commit in the commit's graph with the rows kept. The context grows as the target's
  // cache did, which it must have followed step by step.
  context_length_ += static_cast<int64_t>(rows.size());
  if (context_length_ != target_.cache_length())
    throw Error("GPU drafter: its context holds " + std::to_string(context_length_) + " positions, the target's cache " +
                std::to_string(target_.cache_length()) + " (a target step went unobserved)");
}

void GpuDFlashDrafter::run_draft(int32_t bonus_token, int32_t bonus_position) {
  // The caches hold max_context + block_size rows: the block always fits after the context.
  if (context_length_ > exec_.plan().header.limits.max_context)
    throw Error("GPU drafter: the context of " + std::to_string(context_length_) + " positions is past the plan's " +
                std::to_string(exec_.plan().header.limits.max_context));
  StepInputs in;
  in.tokens.assign(static_cast<size_t>(block_size_), mask_token_);
  in.tokens[0] = bonus_token;
  in.positions.resize(static_cast<size_t>(block_size_));
  for (int64_t i = 0; i < block_size_; ++i) in.positions[static_cast<size_t>(i)] = bonus_position + static_cast<int32_t>(i);
  in.cache_length = static_cast<int32_t>(context_length_);
  in.token_count = static_cast<int32_t>(block_size_);
  exec_.run(*draft_, in);
}

const plan::StepOutput* GpuDFlashDrafter::draft_output(plan::OutputKind kind) const {
  for (const plan::StepOutput& o : draft_->outputs)
    if (o.kind == kind) return &o;
  return nullptr;
}

Matrix GpuDFlashDrafter::propose(int32_t bonus_token, int32_t bonus_position) {
  run_draft(bonus_token, bonus_position);
  const plan::StepOutput& logits = *draft_output(plan::OutputKind::Logits);
  Matrix m(logits.rows, logits.cols);
  exec_.read_output(logits, logits.rows, m.data.data());
  log_softmax_rows(m);
  return m;
}

DeviceRounds* GpuDFlashDrafter::device_rounds(int64_t verify_tokens, bool sampled) {
  if (!GpuDeviceRounds::available(exec_.plan(), verify_tokens, sampled)) return nullptr;
  if (!rounds_ || rounds_tokens_ != verify_tokens) {
    // Each round commits on the device what observe_step would have been told.
    rounds_ = std::make_unique<GpuDeviceRounds>(target_, verify_tokens, [this](int64_t kept) {
      context_length_ += kept;
      if (context_length_ != target_.cache_length())
        throw Error("GPU drafter: its context holds " + std::to_string(context_length_) + " positions, the target's cache " +
                    std::to_string(target_.cache_length()));
    });
    rounds_tokens_ = verify_tokens;
  }
  return rounds_.get();
}

DepthCandidates GpuDFlashDrafter::propose_top(int32_t bonus_token, int32_t bonus_position, int64_t depth, int64_t k) {
  const plan::StepOutput* values = draft_output(plan::OutputKind::TopLogProbs);
  const plan::StepOutput* ids = draft_output(plan::OutputKind::TopIds);
  // More candidates than the plan selects (a budget past its largest bucket): the full rows.
  if (!values || !ids || values->cols < k) return top_candidates(propose(bonus_token, bonus_position), depth, k);
  run_draft(bonus_token, bonus_position);
  const int64_t rows = depth > 0 ? std::min(depth, values->rows) : values->rows;
  std::vector<float> v(static_cast<size_t>(rows * values->cols));
  std::vector<int32_t> i(static_cast<size_t>(rows * ids->cols));
  const GpuExecutor::RawRead reads[] = {{values, rows, v.data()}, {ids, rows, i.data()}};
  exec_.read_raw(reads);  // one wait for both
  return leading_candidates(i, v, rows, values->cols, rows, k);
}

}  // namespace kplan::gpu
