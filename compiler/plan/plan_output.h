#pragma once
// `kplan compile ... -o model.kplan --arch sm_90,sm_120`: lower the final IR (@target, and
// @target_commit) to launch sequences, compile their kernels for every arch and write the plan. One call for the CLI.
#include <filesystem>
#include <optional>
#include <string>

#include "compiler/frontend/checkpoint.h"
#include "compiler/passes/lower_state.h"
#include "compiler/passes/lowered_plan.h"
#include "compiler/plan/stage_progress.h"
#include "ir/ir.h"

namespace kplan::plan {

struct PlanOutputOptions {
  std::filesystem::path out;        // the .kplan file
  std::string archs = "sm_90";      // comma-separated
  std::string buckets = "1,4,8,16,32,64";  // token counts with their own launch sequence
  int64_t max_context = 0;          // KV cache positions; 0: min(max_position_embeddings, 4096)
  // --activations: how the GPU stores the activations kernels write (bf16 | f32). bf16: the
  // 16-token verify step 19% faster at K2.6 width (bench/RESULTS.md 2026-12-06), the tiny HF
  // goldens within transformers' own bf16 error (storage_dtypes.cc); f32 for exact comparisons.
  std::string activations = "bf16";
  // --kv-cache: how the GPU stores the target's KV caches (bf16 | f32); bf16 halves attention's bytes.
  std::string kv_cache = "bf16";
  // --synthetic-weights SEED: no weight bytes; every weight is recorded as generated at load
  // (synthetic_init.h), with the synthetic_weights kernels that write them on the device.
  std::optional<uint64_t> synthetic_seed;
  // The long steps (kernel compile, the weights' checksums and writing) as they advance.
  StageProgress progress{};
};

// The lowering options of a compile: buckets (1 always added), max_context (0: the config's
// max_position_embeddings, at most 4096), the activations' storage dtype, the first --arch. Throws kplan::Error for bad text.
passes::LowerOptions lower_options(const ModelConfig& target, const PlanOutputOptions& options);

// Candidates per depth the drafter's @draft returns for these buckets: a tree verified in the
// largest bucket has at most that many nodes besides its root. Throws kplan::Error for bad text.
int64_t draft_candidates(const PlanOutputOptions& options);

// The checkpoints' tensors by (source, name); null when the target has no weights loaded.
passes::WeightBytes checkpoint_bytes(const TargetCheckpoint& target, const DraftCheckpoint* draft);

// Marks every weight of `lowered` synthetic under `seed` and appends the synthetic_weights
// kernels (one per kind, dtype and group, tuned for `arch`) their entries name.
void make_weights_synthetic(LoweredPlan& lowered, uint64_t seed, int64_t group_size, const std::string& arch);

// Prints a one-line summary (kernels, cache hits, plan size) to stderr. Throws kplan::Error.
// The plan's weights are every weight the module names, the drafter's from `draft`.
void write_compiled_plan(const ir::Module& module, const TargetCheckpoint& target, const DraftCheckpoint* draft,
                         const PlanOutputOptions& options);

}  // namespace kplan::plan
