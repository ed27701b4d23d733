#include "compiler/plan/plan_output.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "compiler/codegen/lower_to_launches.h"
#include "compiler/frontend/draft_config.h"
#include "compiler/plan/ir_weights.h"
#include "compiler/plan/plan_assemble.h"
#include "ir/support/error.h"
#include "ir/printer.h"

namespace kplan::plan {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find(',', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<int64_t> parse_buckets(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : split(text)) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || ptr != item.data() + item.size() || v < 1)
      throw Error("--buckets: '" + item + "' is not a positive token count");
    out.push_back(v);
  }
  if (out.empty()) throw Error("--buckets: no token counts given");
  if (std::find(out.begin(), out.end(), 1) == out.end()) out.push_back(1);  // AR decode
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

void write_compiled_plan(const ir::Module& module, const TargetCheckpoint& target,
                         const std::optional<std::filesystem::path>& draft_dir, const PlanOutputOptions& options) {
  if (!target.has_weights()) throw Error("-o needs the checkpoint's weights: drop --no-weights");
  const ir::Function* fn = module.function("target");
  if (!fn) throw Error("the IR has no @target function to lower");
  codegen::LowerOptions lower;
  lower.buckets = parse_buckets(options.buckets);
  lower.max_context = options.max_context > 0 ? options.max_context
                                              : std::min<int64_t>(target.config().max_position_embeddings, 4096);
  lower.max_tree_nodes = lower.buckets.back();
  const SafetensorsCheckpoint& weights = target.weights();
  LoweredPlan lowered = codegen::lower_target(
      *fn, [&](const std::string& name) { return weights.get(name).bytes; }, lower);
  // The plan carries every weight any function names (the drafter's too), so the CPU reference
  // can run its IR; the lowering above only adds those @target's launches read.
  std::optional<DraftCheckpoint> draft;
  if (draft_dir) draft = DraftCheckpoint::open(*draft_dir);
  add_ir_weights(module, [&](const std::string& source, const std::string& name) {
    if (source == "draft" && draft) return draft->weights().get(name).bytes;
    if (source != "target") throw Error("the IR names weight " + name + " of checkpoint '" + source + "', which was not given");
    return weights.get(name).bytes;
  }, lowered.weights);

  AssembleOptions assemble;
  assemble.archs = split(options.archs);
  codegen::CompileStats stats;
  PlanSources sources{target.dir(), draft_dir, ir::print_module(module), target.config(), std::nullopt};
  if (draft_dir) sources.draft = load_draft_config(*draft_dir / "config.json");
  Plan p = write_plan_from_compile(sources, std::move(lowered), assemble,
                                   options.out, &stats);
  uint64_t bytes = 0;
  for (const Weight& w : p.weights) bytes += w.size;
  // MiB by hand: the compiler does not link the runtime's plan printer.
  std::fprintf(stderr, "kplan compile: wrote %s: %zu buckets, %.2f MiB of weights; %s\n", options.out.c_str(),
               p.buckets.size(), static_cast<double>(bytes) / (1024.0 * 1024.0), stats.summary().c_str());
}

}  // namespace kplan::plan
