// emit-round: the control of a greedy DDTree round as device steps, so the runtime can chain a
// whole round into one CUDA graph (runtime/gpu/device_rounds.h): "round_draft_inputs" (@draft's
// block inputs from the round state), "round_tree"/T (the best-first tree over @draft's
// candidates, written into a verify step's inputs for @target's bucket T) and "round_walk"/T (the
// walk over @target/T's next_tokens, written into the commit's inputs), "round_sample"/T (at
// temperature > 0, each node's sample from @target/T's logits over its next_tokens, between the
// verify and the walk), with three persistent slots: the round state (an output of the round_walk
// buckets, which the host reads back), the tree, and the sampling parameters.
// Only for a plan with a drafter whose @draft returns candidates; each @target bucket of 2 to 512
// tokens gets its pair. The kernels are kernels_templates/ddtree_round.cuh.
#include <algorithm>

#include "compiler/codegen/families/ddtree_round.h"
#include "compiler/codegen/launch_geometry.h"
#include "compiler/passes/lower_state.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

using plan::LaunchArg;
using plan::StepInputKind;

const plan::StepOutput* output_of(const plan::Bucket& b, plan::OutputKind kind) {
  for (const plan::StepOutput& o : b.outputs)
    if (o.kind == kind) return &o;
  return nullptr;
}

class RoundEmitter {
 public:
  RoundEmitter(LowerState& s, plan::LoweredPlan& p) : s_(s), p_(p) {}

  void run() {
    const plan::Bucket* draft = nullptr;
    for (const plan::Bucket& b : p_.buckets)
      if (b.program == "draft") draft = &b;
    if (!draft || !s_.module || !s_.module->attrs().has("mask_token_id")) return;
    const plan::StepOutput* ids = output_of(*draft, plan::OutputKind::TopIds);
    const plan::StepOutput* log_probs = output_of(*draft, plan::OutputKind::TopLogProbs);
    if (!ids || !log_probs) return;
    const plan::StepOutput top_ids = *ids, top_log_probs = *log_probs;  // p_.buckets grows below

    struct Verify {
      uint32_t tokens;
      plan::StepOutput next, logits;  // @target/T's next_tokens and logits
    };
    std::vector<Verify> verify;
    for (const plan::Bucket& b : p_.buckets)
      if (b.program == "target" && b.tokens >= 2 && b.tokens <= 512) {
        const plan::StepOutput* next = output_of(b, plan::OutputKind::TokenIds);
        const plan::StepOutput* logits = output_of(b, plan::OutputKind::Logits);
        if (next && logits) verify.push_back({b.tokens, *next, *logits});
      }
    if (verify.empty()) return;
    uint32_t largest = 0;
    for (const Verify& v : verify) largest = std::max(largest, v.tokens);
    const int64_t words = codegen::round_state_words(largest);
    const uint32_t state = add_slot("round.state", static_cast<uint64_t>(4 * words));
    const uint32_t tree = add_slot("round.tree", 4ull * 2 * largest);
    const uint32_t sample = add_slot("round.sample", codegen::kRoundSampleBytes);

    const LaunchArg tokens = LaunchArg::step_input(StepInputKind::Tokens),
                    positions = LaunchArg::step_input(StepInputKind::Positions),
                    mask = LaunchArg::step_input(StepInputKind::TreeMask),
                    cache_len = LaunchArg::step_input(StepInputKind::CacheLength),
                    count = LaunchArg::step_input(StepInputKind::TokenCount);
    const std::string& arch = s_.options.arch;
    {
      plan::Bucket b;
      b.program = "round_draft_inputs";
      b.tokens = 1;
      const codegen::KernelSource k =
          codegen::round_draft_inputs_kernel(s_.draft_rows, s_.module->attrs().get_int("mask_token_id"), arch);
      add_launch(b, k, codegen::launch_args(codegen::round_draft_inputs::Args{
                           .state = LaunchArg::buffer(state), .tokens = tokens, .positions = positions,
                           .cache_len = cache_len, .token_count = count}));
      p_.buckets.push_back(std::move(b));
    }
    for (const auto& [t, next, logits] : verify) {
      plan::Bucket build;
      build.program = "round_tree";
      build.tokens = t;
      add_launch(build, codegen::round_tree_kernel(t, top_ids.cols, top_ids.rows, largest, arch),
                 codegen::launch_args(codegen::round_tree::Args{
                     .state = LaunchArg::buffer(state), .top_ids = LaunchArg::buffer(top_ids.slot, top_ids.offset),
                     .top_log_probs = LaunchArg::buffer(top_log_probs.slot, top_log_probs.offset), .tokens = tokens,
                     .positions = positions, .tree_mask = mask, .cache_len = cache_len, .token_count = count,
                     .tree = LaunchArg::buffer(tree)}));
      p_.buckets.push_back(std::move(build));

      plan::Bucket pick;
      pick.program = "round_sample";
      pick.tokens = t;
      add_launch(pick, codegen::round_sample_kernel(t, logits.cols, arch),
                 codegen::launch_args(codegen::round_sample::Args{
                     .state = LaunchArg::buffer(state), .sample = LaunchArg::buffer(sample),
                     .logits = LaunchArg::buffer(logits.slot, logits.offset), .positions = positions,
                     .next_ids = LaunchArg::buffer(next.slot, next.offset),
                     .row_stride = logits.cols}));
      p_.buckets.push_back(std::move(pick));

      plan::Bucket walk;
      walk.program = "round_walk";
      walk.tokens = t;
      add_launch(walk, codegen::round_walk_kernel(t, arch),
                 codegen::launch_args(codegen::round_walk::Args{
                     .state = LaunchArg::buffer(state), .next_ids = LaunchArg::buffer(next.slot, next.offset),
                     .tree = LaunchArg::buffer(tree), .tokens = tokens, .token_count = count}));
      plan::StepOutput o;
      o.kind = plan::OutputKind::RoundState;
      o.slot = state;
      o.dtype = DType::I32;
      o.rows = 1;
      o.cols = words;
      walk.outputs.push_back(o);
      p_.buckets.push_back(std::move(walk));
    }
  }

 private:
  uint32_t add_slot(const std::string& name, uint64_t bytes) {
    plan::BufferSlot slot;
    slot.name = name;
    slot.role = plan::SlotRole::Persistent;
    slot.size = bytes;
    p_.buffers.slots.push_back(slot);
    return static_cast<uint32_t>(p_.buffers.slots.size() - 1);
  }

  void add_launch(plan::Bucket& b, const codegen::KernelSource& k, std::vector<LaunchArg> args) {
    uint32_t index = 0;
    while (index < p_.kernels.size() && p_.kernels[index].id != k.id) ++index;
    if (index == p_.kernels.size()) p_.kernels.push_back(k);
    const codegen::LaunchDims d = codegen::launch_dims(k, 1, 1);
    plan::Launch launch;
    launch.kernel = index;
    launch.grid = d.grid;
    launch.block = d.block;
    launch.smem_bytes = d.smem_bytes;
    launch.args = std::move(args);
    launch.note = b.program + " -> " + k.id;
    b.launches.push_back(std::move(launch));
  }

  LowerState& s_;
  plan::LoweredPlan& p_;
};

}  // namespace

void emit_round(LowerState& s) {
  if (!s.lowered) throw Error("emit-round runs after emit-plan");
  RoundEmitter(s, *s.lowered).run();
}

}  // namespace kplan::passes
