#include "compiler/driver/compile.h"

#include "compiler/passes/pipeline.h"

namespace kplan {

CompileResult compile_to_ir(const CompileOptions& options) {
  CompileResult r;
  const WeightsMode mode = options.load_weights ? WeightsMode::Load : WeightsMode::None;
  if (!options.stop_after.empty()) passes::find_pass(options.stop_after);  // fail fast on typos
  r.target = TargetCheckpoint::open(options.model, mode, options.layers);
  if (options.draft) {
    // A drafter's mask_token string is resolved by the target's special tokens.
    r.draft = DraftCheckpoint::open(*options.draft, mode, {target_special_tokens(r.target->dir()), options.draft_yarn_amplitude});
    check_draft_fits_target(r.draft->config(), r.target->config(), options.max_context);
  }
  DraftInput draft;
  if (r.draft) draft = DraftInput{&r.draft->config(), &r.draft->specs()};
  r.module = build_module(r.target->config(), r.target->specs(), draft, options.build);
  passes::run_pipeline(*r.module, options.stop_after);
  return r;
}

}  // namespace kplan
