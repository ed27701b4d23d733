#include "compiler/driver/compile.h"

#include "compiler/passes/pipeline.h"
#include "ir/support/error.h"

namespace kplan {

void check_draft_context_window(int64_t n, bool have_draft) {
  if (n < 0)
    throw Error("--draft-context-window " + std::to_string(n) + ": the drafter context window must be >= 0 (0: the whole context)");
  if (n > 0 && !have_draft)
    throw Error("--draft-context-window " + std::to_string(n) + " is the drafter's attention window: give the drafter with --draft DIR");
}

CompileResult compile_to_ir(const CompileOptions& options) {
  CompileResult r;
  const WeightsMode mode = options.load_weights ? WeightsMode::Load : WeightsMode::None;
  if (!options.stop_after.empty()) passes::find_pass(options.stop_after);  // fail fast on typos
  check_draft_context_window(options.draft_context_window, options.draft.has_value());
  r.target = TargetCheckpoint::open(options.model, mode, options.layers, options.on_files);
  if (options.draft) {
    // A drafter's mask_token string is resolved by the target's special tokens.
    r.draft = DraftCheckpoint::open(*options.draft, mode,
                                    {target_special_tokens(r.target->dir()), options.draft_yarn_amplitude,
                                     options.draft_context_window, options.on_files});
    check_draft_fits_target(r.draft->config(), r.target->config(), options.max_context);
  }
  DraftInput draft;
  if (r.draft) draft = DraftInput{&r.draft->config(), &r.draft->specs()};
  r.module = build_module(r.target->config(), r.target->specs(), draft, options.build);
  passes::run_pipeline(*r.module, options.stop_after);
  return r;
}

}  // namespace kplan
