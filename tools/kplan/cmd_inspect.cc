// kplan inspect: a plan's contents, readably (through the runtime's C API). Default: a summary;
// --ir, --kernels, --memory, --launches, --weights print one section each (several may be given).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/phase.h"

namespace kplan::cli {

namespace {

struct InspectArgs {
  std::string plan;
  bool ir = false, kernels = false, memory = false, launches = false, weights = false, no_verify = false;
};

void run_inspect(const InspectArgs& a) {
  // Checksumming a big plan's weights takes a while: shown on stderr (phase.h).
  Phase phase("kplan inspect", a.no_verify ? "opening " + a.plan : "opening " + a.plan + " (verifying its weights' checksums; --no-verify skips it)", false);
  PlanPtr plan = open_plan(a.plan.c_str(), !a.no_verify, &Phase::progress_callback, &phase);
  phase.done();
  std::vector<kplan_plan_section> sections;
  if (a.ir) sections.push_back(KPLAN_PLAN_SECTION_IR);
  if (a.kernels) sections.push_back(KPLAN_PLAN_SECTION_KERNELS);
  if (a.memory) sections.push_back(KPLAN_PLAN_SECTION_MEMORY);
  if (a.launches) sections.push_back(KPLAN_PLAN_SECTION_LAUNCHES);
  if (a.weights) sections.push_back(KPLAN_PLAN_SECTION_WEIGHTS);
  if (sections.empty()) sections.push_back(KPLAN_PLAN_SECTION_SUMMARY);
  for (kplan_plan_section s : sections) {
    const char* text = nullptr;
    api_check(kplan_plan_describe(plan.get(), s, &text));
    std::fputs(text, stdout);
  }
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Show what a compiled plan (.kplan) holds");
  cmd->add_option("plan", args->plan, "the .kplan file")->required();
  cmd->add_flag("--ir", args->ir, "the final IR");
  cmd->add_flag("--kernels", args->kernels, "kernel instances per arch, with their readable ids");
  cmd->add_flag("--memory", args->memory, "the activation arena's slots, step inputs and KV caches");
  cmd->add_flag("--launches", args->launches, "each bucket's launch sequence");
  cmd->add_flag("--weights", args->weights, "the weights table");
  cmd->add_flag("--no-verify", args->no_verify, "skip hashing the weights (fast on large plans)");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace kplan::cli
