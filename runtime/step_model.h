#pragma once
// The two interfaces the decoding loops (AR, DFlash, DDTree) drive, whatever executes them:
// the CPU reference backend implements them over the IR, the GPU runtime over a plan.
#include <cstdint>
#include <span>
#include <vector>

#include "schemas/model_spec.h"

namespace kplan {

// A dense fp32 row-major matrix [rows, cols].
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}
  float* row(int64_t r) { return data.data() + r * cols; }
  const float* row(int64_t r) const { return data.data() + r * cols; }
};

// One target step: T new tokens run against the committed KV cache.
struct StepInput {
  std::vector<int32_t> tokens;     // T tokens
  std::vector<int32_t> positions;  // position id of each (for a tree node: root position + depth)
  // Attention among the T new tokens, as an ancestor bitmask packed in 32-bit words
  // [T, ceil(T/32)]: bit j of row i set when token i may attend new token j (i itself included).
  // Empty means causal (token i attends new tokens 0..i). Every token attends the whole cache.
  std::vector<uint32_t> tree_mask;
  // Greedy callers need only each token's argmax: a model that selects tokens on the device
  // (a TokenIds output) may then skip copying the logits back and leave them empty.
  bool ids_only = false;
};

struct StepOutput {
  Matrix logits;  // [T, vocab]
  // Outputs of the capture layers (set_capture_layers), each [T, hidden], in the order given.
  std::vector<Matrix> captured;
  // The argmax of each token's logits [T] when the model selected them on the device (empty
  // otherwise); with StepInput::ids_only the logits may then be empty.
  std::vector<int32_t> token_ids;
};

class TargetModel {
 public:
  virtual ~TargetModel() = default;
  virtual const ModelConfig& config() const = 0;
  // Runs one step. The step's K/V entries are held as pending after the committed cache.
  virtual StepOutput forward(const StepInput& in) = 0;
  // Keeps the pending entries at the given step indices (in order), drops the others, and
  // makes the kept ones committed: cache_length() grows by keep.size().
  virtual void commit(std::span<const int32_t> keep) = 0;
  virtual int64_t cache_length() const = 0;
  virtual int64_t max_context() const = 0;
  // The most tokens one forward() takes (the GPU: its largest bucket); 0 means no limit. Longer
  // prompts are fed in chunks of this size (runtime/ddtree/prefill.h).
  virtual int64_t max_step_tokens() const { return 0; }
  virtual void reset() = 0;
  // Which layers' outputs (decoder layer index, 0-based) forward() returns in `captured`.
  virtual void set_capture_layers(std::vector<int64_t> layer_ids) = 0;
  // Seconds this target's host has spent blocked on its device so far (0: no device).
  virtual double device_wait_seconds() const { return 0; }
  // The cost model of `--budget auto`: [t] = seconds of a step of t tokens, t = 0 ..
  // max_step_tokens() (measured on the device; call it before a prefill: it may run steps).
  // Empty: this target has none.
  virtual std::vector<double> step_costs() { return {}; }
};

// Each depth's k most likely draft tokens, best first (ties: the lower id), with their
// log-probabilities (normalised over the whole vocabulary): row d-1 is depth d.
struct DepthCandidates {
  int64_t depth = 0, k = 0;
  std::vector<int32_t> ids;       // [depth, k]
  std::vector<float> log_probs;   // [depth, k]
};

// `log_probs` [rows, vocab] (rows log-softmax-normalised here): the best min(k, vocab) of each of
// its first `depth` rows (all rows when depth is 0).
DepthCandidates top_candidates(const Matrix& log_probs, int64_t depth, int64_t k);
// The first k of each row of selected candidates [rows, width] (best first, as a drafter's topk
// returns them), for the first `depth` rows (all when 0); k <= width.
DepthCandidates leading_candidates(std::span<const int32_t> ids, std::span<const float> log_probs, int64_t rows,
                                   int64_t width, int64_t depth, int64_t k);

// Whole rounds on the device that holds the target and the drafter (the GPU's
// runtime/gpu/gpu_device_rounds.h): draft, tree, verify, walk and commit with no host work
// between them, exactly the rounds decode_speculative runs on the host.
struct RoundYield {
  int64_t nodes = 0;            // the verified tree's size, root included
  std::vector<int32_t> tokens;  // the accepted path's tokens after the root, then the next bonus
  // The verified tree's path log-probabilities, root (0.0) first.
  std::vector<double> path_log_probs;
};

// A device round at temperature > 0 (no sampling processor) draws as the host's TokenSampler:
// the pick of output token k takes draw k of the seed (ir/support/sample_draws.h).
struct RoundSampling {
  double temperature = 0.0;  // 0: greedy rounds (the target's argmax at each node)
  uint64_t seed = 0;
  uint64_t next_draw = 0;  // the sampler's next draw index when the rounds begin
};

// A device round's proposal: each depth's candidate log-probabilities [rows, width], best first.
struct ProposedCandidates {
  int64_t rows = 0, width = 0;
  std::vector<float> log_probs;
};

class DeviceRounds {
 public:
  virtual ~DeviceRounds() = default;
  // Rounds from `bonus` at the target's cache length, `remaining` tokens still wanted (a round
  // never drafts past them): trees of up to `budget` nodes (single_path: the drafter's chain).
  virtual void begin(int32_t bonus, int64_t budget, bool single_path, int64_t remaining,
                     const RoundSampling& sampling = {}) = 0;
  // One round of `budget` nodes (at most begin's) as one launch; the target's and the drafter's
  // caches hold its accepted path afterwards.
  virtual RoundYield round(int64_t budget) = 0;
  // A round in two launches, for a budget chosen from the round's own tree (--budget auto):
  // propose() drafts from the bonus and returns each depth's candidate log-probabilities (all the
  // drafter's rows, its k per row), from which the host scores the tree to choose on
  // (draft_tree_scores); verify(budget) builds that tree's first 1 + budget nodes on the device
  // (the same best-first pops), verifies, walks and commits.
  virtual ProposedCandidates propose() = 0;
  virtual RoundYield verify(int64_t budget) = 0;
};

// A drafter proposes a distribution for each of the next positions after the bonus token.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // The target committed these tokens (at these positions); `captured` holds the target's
  // capture-layer outputs for them (one Matrix per capture layer, rows = tokens).
  virtual void observe(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                       const std::vector<Matrix>& captured) = 0;
  // Log-probabilities [depth, vocab] for positions bonus_position+1 ... +depth, given the bonus
  // token (the target's next token, not yet committed) at bonus_position.
  virtual Matrix propose(int32_t bonus_token, int32_t bonus_position) = 0;
  // The tree builder's input: the best k tokens of each of the first `depth` positions. By
  // default taken from propose(); a drafter that selects them on its device overrides it.
  virtual DepthCandidates propose_top(int32_t bonus_token, int32_t bonus_position, int64_t depth, int64_t k) {
    return top_candidates(propose(bonus_token, bonus_position), depth, k);
  }
  // The target ran `step` and committed its rows `rows` (increasing step indices): by default
  // observe() of those tokens, positions and captured rows. A drafter that reads the target's
  // features where they lie (the GPU) overrides it and needs no captured rows copied.
  virtual void observe_step(const StepInput& step, const StepOutput& out, std::span<const int32_t> rows);
  // Target layers whose outputs observe() needs (empty: none).
  virtual std::vector<int64_t> capture_layers() const { return {}; }
  virtual int64_t max_depth() const = 0;
  virtual void reset() = 0;
  // Rounds verified in steps of `verify_tokens` (sampled: at temperature > 0) run whole on the
  // device, when this drafter and its target can (null otherwise: the host runs the round).
  virtual DeviceRounds* device_rounds(int64_t verify_tokens, bool sampled = false) {
    (void)verify_tokens;
    (void)sampled;
    return nullptr;
  }
};

}  // namespace kplan
