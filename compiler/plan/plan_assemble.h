#pragma once
// Assembling a Plan from a compile: the lowered launch program, its kernels compiled for every
// requested arch (through the kernel cache), and what the runtime and `kplan inspect` read
// beside them (config.json text, tokenizer.json, the final IR, tool versions).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/compile_kernels.h"
#include "compiler/plan/stage_progress.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "compiler/passes/lowered_plan.h"
#include "schemas/plan_model.h"

namespace kplan::plan {

struct PlanSources {
  std::filesystem::path model_dir;                 // config.json (+ tiktoken.model and tokenizer_config.json, or tokenizer.json, when present)
  std::optional<std::filesystem::path> draft_dir;  // the drafter's config.json
  std::string ir_text;                             // the final IR, printed
  ModelConfig model;                               // the target's spec, as the frontend parsed it
  std::optional<DraftConfig> draft;                // the drafter's, with a drafter
};

struct AssembleOptions {
  std::vector<std::string> archs = {"sm_90"};
  codegen::CompileOptions kernels;  // its archs are replaced by `archs`
  // The kernel compile (kernels compiled by NVRTC, cache hits aside) and, in
  // write_plan_from_compile, the weights' checksums and writing; replaces kernels.progress.
  StageProgress progress{};
};

// Sets what a plan reads from its sources beside the launches: the typed specs, the config.json
// texts, the tokenizer and the IR text (assemble_plan and the CPU reference plan both use it).
void describe_sources(const PlanSources& sources, Plan& p);

// The plan's record of a kernel instance, its cubins aside: id, entry, family, library, constants,
// parameter types and names (what assemble_plan writes; the ops tests' GPU runner hands a library
// call the same record).
Kernel kernel_record(const codegen::KernelSource& src);

// Throws kplan::Error (NVRTC failures carry the kernel id and log).
Plan assemble_plan(const PlanSources& sources, LoweredPlan lowered, const AssembleOptions& options,
                   codegen::CompileStats* stats = nullptr);

// Weight entries viewing a checkpoint's tensors for `specs`, in spec order (checkpoint names,
// dtypes, shapes and bytes unchanged): what lowering starts from for weights used as they are.
std::vector<Weight> checkpoint_weights(const SafetensorsCheckpoint& checkpoint, const std::vector<TensorSpec>& specs);

// `kplan compile -o`: assemble and write in one call; prints nothing. Returns the plan written.
Plan write_plan_from_compile(const PlanSources& sources, LoweredPlan lowered, const AssembleOptions& options,
                             const std::filesystem::path& out, codegen::CompileStats* stats = nullptr);

}  // namespace kplan::plan
