#include "compiler/driver/reference_plan.h"

#include <memory>
#include <numeric>

#include "compiler/driver/compile.h"
#include "compiler/passes/weight_layout.h"
#include "compiler/plan/plan_assemble.h"
#include "ir/printer.h"
#include "ir/support/error.h"

namespace kplan {

plan::Plan reference_plan(const std::filesystem::path& checkpoint_dir, const ReferencePlanOptions& options) {
  CompileOptions compile;
  compile.model = checkpoint_dir;
  compile.draft = options.draft;
  compile.build.tree_mask = options.tree_mask;
  compile.draft_context_window = options.draft_context_window;
  compile.on_files = options.on_files;
  if (options.capture_all_layers) {
    // The layer count comes from the config alone, before the weights are opened.
    const int64_t layers = TargetCheckpoint::open(checkpoint_dir, WeightsMode::None).config().num_hidden_layers;
    std::vector<int64_t> all(static_cast<size_t>(layers));
    std::iota(all.begin(), all.end(), 0);
    compile.build.capture_layers = all;
  }
  // The checkpoints stay mapped as long as the plan: its weights view them.
  auto compiled = std::make_shared<CompileResult>(compile_to_ir(compile));

  plan::Plan p;
  p.header.compiler_version = kReferencePlanCompiler;
  const ModelConfig& model = compiled->target->config();
  p.header.limits.max_context = model.max_position_embeddings;
  p.header.limits.max_tokens_per_step = model.max_position_embeddings;  // the CPU takes any step that fits
  plan::PlanSources sources{compiled->target->dir(), options.draft, ir::print_module(*compiled->module), model,
                            std::nullopt};
  if (compiled->draft) sources.draft = compiled->draft->config();
  plan::describe_sources(sources, p);
  const std::vector<ir::Function*> functions = compiled->module->functions();
  passes::add_function_weights({functions.begin(), functions.end()}, [&](const std::string& source, const std::string& name) {
    if (source == "draft" && compiled->draft) return compiled->draft->weights().get(name).bytes;
    if (source != "target") throw Error("the IR names weight " + name + " of checkpoint '" + source + "', which was not given");
    return compiled->target->weights().get(name).bytes;
  }, p.weights);
  compiled->module.reset();  // the plan keeps its text
  p.backing = compiled;
  return p;
}

}  // namespace kplan
