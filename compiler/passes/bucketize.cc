// bucketize: one launch sequence per (program, token count). @target gets the requested
// buckets (1 for AR decode, the tree budgets for verify, prefill chunks); @target_commit one
// bucket at the largest step (the host writes the kept indices into the Tokens input and their
// count into TokenCount; kv_compact clamps to them), so a GPU commit is one graph launch rather
// than a host memcpy per row. The drafter: @draft_context at @target's buckets (it runs over
// the rows of the target step just taken), @draft_commit like @target_commit, @draft once at
// its block size (a constant).
#include <algorithm>

#include "compiler/passes/lower_state.h"

namespace kplan::passes {

void bucketize(LowerState& s) {
  s.buckets.clear();
  std::vector<int64_t> target = s.options.buckets;
  std::sort(target.begin(), target.end());
  target.erase(std::unique(target.begin(), target.end()), target.end());
  for (const ir::Function* fn : s.programs) {
    if (fn->name() == "target") {
      for (int64_t t : target) s.buckets.push_back({fn, t});
    } else if (fn->name() == "target_commit" || fn->name() == "draft_commit") {
      s.buckets.push_back({fn, s.max_tokens});
    } else if (fn->name() == "draft_context") {
      for (int64_t t : target) s.buckets.push_back({fn, t});
    } else if (fn->name() == "draft") {
      s.buckets.push_back({fn, s.draft_rows});
    }
  }
}

}  // namespace kplan::passes
