#pragma once
// Kernel families round_draft_inputs, round_tree, round_sample, round_walk: kernels_templates/ddtree_round.cuh.
// A greedy DDTree round's control on the device (the drafter's block inputs, the best-first tree
// into the verify step's inputs, the walk into the commit's), so the round is one CUDA graph.
//
// Template parameters (compile-time constants, template order):
//   round_draft_inputs: BLOCK, MASK, THREADS (tuning)
//   round_tree:         T, K, D, NMAX, THREADS (tuning: 32)
//   round_sample:       T, V, THREADS (tuning)
//   round_walk:         T, THREADS (tuning: 32)
// See the template's doc block for their meaning, the round state's layout and the launches.
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::round_draft_inputs {

struct Args {
  KPLAN_PTR(state);        // int32 round state
  KPLAN_PTR(tokens);       // the step inputs @draft reads
  KPLAN_PTR(positions);
  KPLAN_PTR(cache_len);
  KPLAN_PTR(token_count);
};

const Family& family();

}  // namespace kplan::codegen::round_draft_inputs

namespace kplan::codegen::round_tree {

struct Args {
  KPLAN_PTR(state);
  KPLAN_PTR(top_ids);        // int32 [D, K]: @draft's candidates
  KPLAN_PTR(top_log_probs);  // f32 [D, K]
  KPLAN_PTR(tokens);         // the verify step's inputs (bucket T)
  KPLAN_PTR(positions);
  KPLAN_PTR(tree_mask);
  KPLAN_PTR(cache_len);
  KPLAN_PTR(token_count);
  KPLAN_PTR(tree);           // int32 [2 T]: parents, tokens (round_walk reads them)
};

const Family& family();

}  // namespace kplan::codegen::round_tree

namespace kplan::codegen::round_sample {

struct Args {
  KPLAN_PTR(state);
  KPLAN_PTR(sample);     // u64 [3]: seed, temperature (f64 bits), draw base (i64)
  KPLAN_PTR(logits);     // f32 [T, V]: @target/T's logits
  KPLAN_PTR(positions);  // the verify step's positions (a node's depth)
  KPLAN_PTR(next_ids);   // int32 [T]: overwritten with each node's sample
  KPLAN_I32(row_stride);
};

const Family& family();

}  // namespace kplan::codegen::round_sample

namespace kplan::codegen::round_walk {

struct Args {
  KPLAN_PTR(state);
  KPLAN_PTR(next_ids);     // int32 [T]: the target's choice at each node
  KPLAN_PTR(tree);
  KPLAN_PTR(tokens);       // the commit's kept indices
  KPLAN_PTR(token_count);  // their count
};

const Family& family();

}  // namespace kplan::codegen::round_walk

namespace kplan::codegen {

// The instances for a drafter of `block` rows with mask token `mask`, a verify bucket of
// `tokens` tokens and @draft candidates [rows, k] (tuning from heuristics/<arch>.cc).
KernelSource round_draft_inputs_kernel(int64_t block, int64_t mask, std::string_view arch = kDefaultArch);
KernelSource round_tree_kernel(int64_t tokens, int64_t k, int64_t rows, int64_t max_tokens,
                               std::string_view arch = kDefaultArch);
KernelSource round_sample_kernel(int64_t tokens, int64_t vocab, std::string_view arch = kDefaultArch);
KernelSource round_walk_kernel(int64_t tokens, std::string_view arch = kDefaultArch);

// Bytes of the sampling parameters round_sample reads (seed, temperature, draw base).
inline constexpr uint64_t kRoundSampleBytes = 3 * 8;

// Words of the round state (kernels_templates/ddtree_round.cuh's layout) for verify buckets of
// up to `tokens` tokens: the header, the yield of a whole path, the largest tree's path scores.
inline int64_t round_state_words(int64_t tokens) { return 16 + (tokens + 1) + tokens; }

}  // namespace kplan::codegen
