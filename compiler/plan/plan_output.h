#pragma once
// `kplan compile ... -o model.kplan --arch sm_90,sm_120`: lower the final IR of @target to launch
// sequences, compile their kernels for every arch and write the plan. One call for the CLI.
#include <filesystem>
#include <optional>
#include <string>

#include "compiler/frontend/checkpoint.h"
#include "ir/ir.h"

namespace kplan::plan {

struct PlanOutputOptions {
  std::filesystem::path out;        // the .kplan file
  std::string archs = "sm_90";      // comma-separated
  std::string buckets = "1,4,8,16,32,64";  // token counts with their own launch sequence
  int64_t max_context = 0;          // KV cache positions; 0: min(max_position_embeddings, 4096)
};

// Prints a one-line summary (kernels, cache hits, plan size) to stderr. Throws kplan::Error.
void write_compiled_plan(const ir::Module& module, const TargetCheckpoint& target,
                         const std::optional<std::filesystem::path>& draft_dir, const PlanOutputOptions& options);

}  // namespace kplan::plan
