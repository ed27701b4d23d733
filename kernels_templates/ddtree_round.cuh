#pragma once
// A DDTree round's control on the device, so a whole greedy round (draft, tree, verify, walk,
// commit) is one CUDA graph with no host work between its steps (runtime/gpu/device_rounds.h
// chains them: round_draft_inputs, @draft, round_tree/T, @target/T + @draft_context/T,
// round_walk/T, @target_commit + @draft_commit). Each kernel writes the step inputs the next
// program reads, exactly as the host would have (GpuTargetModel::step_inputs_for), and the round
// state the host reads back once per round.
//
// Round state (int32 words; runtime/gpu/device_rounds.h mirrors the layout):
//   0 bonus        the next round's root token (the target's choice after the accepted path)
//   1 cache_length committed positions (the target's and the drafter's caches: they agree)
//   2 budget       tree nodes besides the root (the host sets it)
//   3 top_k        candidates per depth (0: as many as the budget; 1: a single path)
//   4 max_depth    the drafter's deepest depth (block size - 1)
//   5 remaining    tokens the decode still wants (the host sets it; each round subtracts)
//   6 max_context  positions the target's cache holds
//   7 nodes        this round's tree size, root included
//   8 accepted     this round's accepted path length, root included (= tokens it yields)
//   9 rounds       rounds run since the host last set the state
//   10             (unused)
//   11 scored      nodes of the built tree (root apart) whose path log-probabilities follow
//   16 ...         this round's yield: the accepted path's tokens after the root, then the
//                  next bonus (accepted words in all)
//   16 + NMAX + 1  the built tree's path log-probabilities, nodes 1 ... scored (f32)
//
// round_draft_inputs: @draft's step inputs from the state: tokens [bonus, MASK, ...], positions
//   L + i, cache length L, token count BLOCK.
//   Template parameters: BLOCK (the drafter's block size), MASK (its mask token id), THREADS.
//   Launch: grid (1), block (THREADS >= BLOCK).
//   Arguments: state, tokens, positions, cache_len, token_count (the step input slots).
//
// round_tree: the best-first tree of runtime/ddtree/draft_tree.cc over @draft's candidates, the
//   same tree to the node and in the same order: scores are path log-probabilities summed in
//   double from the f32 candidates, the frontier's best pops first (ties: first pushed), and a
//   pop pushes its next sibling, then its best child. Depth: min(max_depth, remaining - 1,
//   room - 1, D); budget: min(budget, room - 1, T - 1), room = max_context - L; k: min(budget,
//   top_k when set, K). Writes the verify step's inputs for bucket T (padding rows as the host
//   pads: token 0, the last real position, a mask of themselves), the tree (parents, tokens) for
//   round_walk, and the tree's path log-probabilities into the state. One warp: each pop is a
//   warp-wide argmax over the frontier (<= NMAX entries); the candidates a tree can use are staged
//   in shared memory first when they fit (16 KiB), so the serial pops read no global memory.
//   Template parameters: T (the verify bucket's tokens), K (candidates per depth in @draft's
//   outputs), D (their rows), NMAX (the largest verify bucket's tokens: the state's layout and
//   the largest tree), THREADS (32).
//   Launch: grid (1), block (32).
//   Arguments: state, top_ids (int32 [D, K]), top_log_probs (f32 [D, K]), tokens, positions,
//   tree_mask (uint32 [T, ceil(T / 32)]), cache_len, token_count, tree (int32 [2 T]).
//
// round_sample: a round at temperature > 0 (no sampling processor): each node's pick, the host
//   sampler's (runtime/ddtree/token_sampler.cc) from @target/T's logits: weights
//   exp((logit - max) / temperature) in double, the inverse CDF at u * total in index order (the
//   last token of non-zero weight on a top-end rounding), u the pick's draw of the seed
//   (ir/support/sample_draws.h: counter-based, the draw of depth d in the round rooted at length L
//   is base + L + d). Overwrites next_ids, so round_walk walks the samples. A non-finite logit in
//   a row makes its pick -1 (the host refuses the round: no token is -1). Each thread sums a
//   contiguous chunk of the row; the chunks' exclusive prefix (a block scan in double) tells the
//   one thread whose chunk holds u to scan it.
//   Template parameters: T, V (vocab), THREADS.
//   Launch: grid (T), block (THREADS); rows past the round's nodes return.
//   Arguments: state, sample (u64 [3]: seed, temperature as f64 bits, base as i64; the host
//   writes it at the rounds' start), logits (f32, row r at r * row_stride), positions (the verify
//   step's: depth = position - cache length), next_ids (int32 [T]), row_stride.
//
// round_walk: the greedy walk of runtime/ddtree/tree_walk.cc over the target's choices at each
//   node (@target/T's next_tokens): from the root, follow the child whose token is the target's
//   choice; the first node without one yields the bonus. Writes the commit's inputs (the kept
//   node indices into tokens, their count into token_count; cache_len stays L) and the state.
//   Template parameters: T, THREADS (32).
//   Launch: grid (1), block (32).
//   Arguments: state, next_ids (int32 [T]), tree, tokens, token_count.
#include "common.cuh"
#include "sample_draws.h"

namespace kp {

namespace round_state {
enum : int {
  kBonus = 0, kCacheLength = 1, kBudget = 2, kTopK = 3, kMaxDepth = 4, kRemaining = 5, kMaxContext = 6,
  kNodes = 7, kAccepted = 8, kRounds = 9, kScored = 11, kYield = 16
};
}  // namespace round_state

template <int BLOCK, int MASK, int THREADS>
__device__ void round_draft_inputs(void* state, void* tokens, void* positions, void* cache_len, void* token_count) {
  static_assert(THREADS >= BLOCK, "one thread per block row");
  const int* s = static_cast<const int*>(state);
  const int i = threadIdx.x;
  const int length = s[round_state::kCacheLength];
  if (i < BLOCK) {
    static_cast<int*>(tokens)[i] = i == 0 ? s[round_state::kBonus] : MASK;
    static_cast<int*>(positions)[i] = length + i;
  }
  if (i == 0) {
    static_cast<int*>(cache_len)[0] = length;
    static_cast<int*>(token_count)[0] = BLOCK;
  }
}

// One frontier entry: the `rank`-th candidate at `depth` under tree node `parent`.
struct RoundCandidate {
  double score;
  int parent, depth, rank, order;
};

// Whether a should pop before b: a higher score, or an equal one pushed first.
__device__ __forceinline__ bool pops_first(double sa, int oa, double sb, int ob) {
  return sa > sb || (sa == sb && oa < ob);
}

template <int T, int K, int D, int NMAX, int THREADS>
__device__ void round_tree(void* state, const void* top_ids, const void* top_log_probs, void* tokens, void* positions,
                           void* tree_mask, void* cache_len, void* token_count, void* tree) {
  static_assert(THREADS == 32, "one warp");
  static_assert(T >= 1 && K >= 1 && D >= 1 && NMAX >= T, "a bucket and candidates");
  constexpr int W = (T + 31) / 32;
  __shared__ RoundCandidate frontier[NMAX + 1];  // a pop adds at most one entry net: <= nodes + 1
  __shared__ int node_parent[NMAX], node_depth[NMAX], node_token[NMAX];
  __shared__ double node_score[NMAX];
  int* s = static_cast<int*>(state);
  const int* ids = static_cast<const int*>(top_ids);
  const float* lp = static_cast<const float*>(top_log_probs);
  const int lane = threadIdx.x;

  const int length = s[round_state::kCacheLength];
  const int room = s[round_state::kMaxContext] - length;
  int depth = min(min(s[round_state::kMaxDepth], s[round_state::kRemaining] - 1), min(room - 1, D));
  int budget = min(min(s[round_state::kBudget], room - 1), T - 1);
  if (budget < 0) budget = 0;
  int k = min(budget, K);
  if (s[round_state::kTopK] > 0) k = min(k, s[round_state::kTopK]);
  if (depth < 0) depth = 0;
  // The first min(T - 1, K) candidates of each depth are all a tree of this bucket can use.
  constexpr int KS = T - 1 < K ? (T - 1 > 0 ? T - 1 : 1) : K;
  constexpr bool kStage = KS * D * 8 <= 16384;
  __shared__ int staged_ids[kStage ? KS * D : 1];
  __shared__ float staged_lp[kStage ? KS * D : 1];
  if constexpr (kStage) {
    for (int i = lane; i < KS * D; i += 32) {
      const int d = i / KS, r = i % KS;
      staged_ids[i] = ids[d * K + r];
      staged_lp[i] = lp[d * K + r];
    }
    __syncwarp();
  }
  // Candidate r of depth d (1-based), from shared memory when staged.
  auto cand_id = [&](int d, int r) { return kStage ? staged_ids[(d - 1) * KS + r] : ids[(d - 1) * K + r]; };
  auto cand_lp = [&](int d, int r) { return kStage ? staged_lp[(d - 1) * KS + r] : lp[(d - 1) * K + r]; };

  int n = 1, f = 0, order = 0;
  if (lane == 0) {
    node_parent[0] = -1;
    node_depth[0] = 0;
    node_token[0] = s[round_state::kBonus];
    node_score[0] = 0.0;
    if (depth > 0 && k > 0) frontier[f++] = {static_cast<double>(cand_lp(1, 0)), 0, 1, 0, order++};
  }
  f = __shfl_sync(0xffffffffu, f, 0);
  order = __shfl_sync(0xffffffffu, order, 0);
  __syncwarp();
  while (f > 0 && n - 1 < budget) {
    double best = 0.0;
    int best_order = 0x7fffffff, best_at = -1;
    for (int i = lane; i < f; i += 32) {
      const RoundCandidate& c = frontier[i];
      if (best_at < 0 || pops_first(c.score, c.order, best, best_order)) {
        best = c.score;
        best_order = c.order;
        best_at = i;
      }
    }
    for (int step = 16; step > 0; step >>= 1) {
      const double other = __shfl_xor_sync(0xffffffffu, best, step);
      const int other_order = __shfl_xor_sync(0xffffffffu, best_order, step);
      const int other_at = __shfl_xor_sync(0xffffffffu, best_at, step);
      if (other_at >= 0 && (best_at < 0 || pops_first(other, other_order, best, best_order))) {
        best = other;
        best_order = other_order;
        best_at = other_at;
      }
    }
    const RoundCandidate c = frontier[best_at];
    __syncwarp();
    if (lane == 0) {
      frontier[best_at] = frontier[f - 1];  // the order field keeps ties stable wherever it lies
      int fill = f - 1;
      node_parent[n] = c.parent;
      node_depth[n] = c.depth;
      node_token[n] = cand_id(c.depth, c.rank);
      node_score[n] = c.score;
      if (c.rank + 1 < k)
        frontier[fill++] = {node_score[c.parent] + static_cast<double>(cand_lp(c.depth, c.rank + 1)), c.parent,
                            c.depth, c.rank + 1, order++};
      if (c.depth < depth)
        frontier[fill++] = {c.score + static_cast<double>(cand_lp(c.depth + 1, 0)), n, c.depth + 1, 0, order++};
      f = fill;
    }
    f = __shfl_sync(0xffffffffu, f, 0);
    order = __shfl_sync(0xffffffffu, order, 0);
    ++n;
    __syncwarp();
  }

  int* tok = static_cast<int*>(tokens);
  int* pos = static_cast<int*>(positions);
  unsigned* mask = static_cast<unsigned*>(tree_mask);
  int* out_tree = static_cast<int*>(tree);
  float* scores = reinterpret_cast<float*>(s + round_state::kYield + NMAX + 1);
  for (int i = 1 + lane; i < n; i += 32) scores[i - 1] = static_cast<float>(node_score[i]);
  const int built = n;
  const int last_position = length + node_depth[n - 1];
  for (int i = lane; i < T; i += 32) {
    unsigned row[W];
    for (int w = 0; w < W; ++w) row[w] = 0u;
    if (i < n) {
      for (int j = i; j >= 0; j = node_parent[j]) row[j / 32] |= 1u << (j % 32);  // itself and its ancestors
      tok[i] = node_token[i];
      pos[i] = length + node_depth[i];
      out_tree[i] = node_parent[i];
      out_tree[T + i] = node_token[i];
    } else {
      row[i / 32] |= 1u << (i % 32);
      tok[i] = 0;
      pos[i] = last_position;
      out_tree[i] = -1;
      out_tree[T + i] = -1;
    }
    for (int w = 0; w < W; ++w) mask[i * W + w] = row[w];
  }
  if (lane == 0) {
    static_cast<int*>(cache_len)[0] = length;
    static_cast<int*>(token_count)[0] = n;
    s[round_state::kNodes] = n;
    s[round_state::kScored] = built - 1;
  }
}

// A block-wide prefix sum in double over THREADS threads: thread t's span [start, end) of the
// running total, spans that tile [0, total) with no gap or overlap (thread t's end is thread
// t + 1's start to the bit, and the last end is the total), so exactly one span holds a point.
template <int THREADS>
__device__ __forceinline__ void block_spans(double v, double& start, double& end, double& total) {
  __shared__ double warp_totals[THREADS / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  double inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double other = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += other;
  }
  double exclusive = __shfl_up_sync(0xffffffffu, inclusive, 1);
  if (lane == 0) exclusive = 0.0;
  __syncthreads();
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  double before = 0.0;
  for (int w = 0; w < warp; ++w) before += warp_totals[w];
  start = before + exclusive;
  end = before + inclusive;
  total = 0.0;
  for (int w = 0; w < THREADS / 32; ++w) total += warp_totals[w];
}

template <int T, int V, int THREADS>
__device__ void round_sample(const void* state, const void* sample, const void* logits, const void* positions,
                             void* next_ids, int row_stride) {
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  constexpr int CHUNK = (V + THREADS - 1) / THREADS;
  const int* s = static_cast<const int*>(state);
  const int r = blockIdx.x;
  if (r >= clamp_int(s[round_state::kNodes], 1, T)) return;
  const unsigned long long* params = static_cast<const unsigned long long*>(sample);
  const double temperature = __longlong_as_double(static_cast<long long>(params[1]));
  const float* row = static_cast<const float*>(logits) + static_cast<i64>(r) * row_stride;
  const int begin = min(V, static_cast<int>(threadIdx.x) * CHUNK), end = min(V, begin + CHUNK);

  float top = neg_inf();
  int finite = 1;
  for (int j = begin; j < end; ++j) {
    const float v = row[j];
    finite &= isfinite(v) ? 1 : 0;
    top = fmaxf(top, v);
  }
  top = block_max<THREADS>(top);
  if (!__syncthreads_and(finite)) {
    if (threadIdx.x == 0) static_cast<int*>(next_ids)[r] = -1;
    return;
  }
  double local = 0.0;
  for (int j = begin; j < end; ++j) local += exp((static_cast<double>(row[j]) - top) / temperature);
  double start, stop, total;
  block_spans<THREADS>(local, start, stop, total);

  const int length = s[round_state::kCacheLength];
  const int depth = static_cast<const int*>(positions)[r] - length;
  const double u = ::kplan::draws::uniform(params[0], ::kplan::draws::draw_index(static_cast<long long>(params[2]), length, depth)) * total;
  // The owner of u, or (u rounded up to the total) the last thread holding weight.
  __shared__ int last_holder;
  if (threadIdx.x == 0) last_holder = -1;
  __syncthreads();
  if (local > 0.0) atomicMax(&last_holder, static_cast<int>(threadIdx.x));
  __syncthreads();
  const bool owner = (u >= start && u < stop) || (u >= total && static_cast<int>(threadIdx.x) == last_holder);
  if (!owner) return;
  double cumulative = start;
  int pick = -1;
  for (int j = begin; j < end; ++j) {
    const double w = exp((static_cast<double>(row[j]) - top) / temperature);
    if (w == 0.0) continue;
    cumulative += w;
    pick = j;  // the last token of non-zero weight absorbs rounding at the top end
    if (u < cumulative) break;
  }
  static_cast<int*>(next_ids)[r] = pick;
}

template <int T, int THREADS>
__device__ void round_walk(void* state, const void* next_ids, const void* tree, void* tokens, void* token_count) {
  static_assert(THREADS == 32, "one warp");
  __shared__ int path[T];
  int* s = static_cast<int*>(state);
  const int* choice = static_cast<const int*>(next_ids);
  const int* parent = static_cast<const int*>(tree);
  const int* token = parent + T;
  const int lane = threadIdx.x;
  const int n = clamp_int(s[round_state::kNodes], 1, T);

  int node = 0, accepted = 1, pick = 0;
  if (lane == 0) path[0] = 0;
  for (;;) {
    pick = choice[node];
    int next = -1;
    for (int base = 1; base < n; base += 32) {
      const int i = base + lane;
      const bool match = i < n && parent[i] == node && token[i] == pick;
      const unsigned hits = __ballot_sync(0xffffffffu, match);
      if (hits) next = base + 31 - __clz(hits);  // the last match, as the host walk takes it
    }
    if (next < 0) break;
    node = next;
    if (lane == 0) path[accepted] = node;
    ++accepted;
  }
  __syncwarp();
  int* keep = static_cast<int*>(tokens);
  for (int i = lane; i < accepted; i += 32) {
    keep[i] = path[i];
    s[round_state::kYield + i] = i + 1 < accepted ? token[path[i + 1]] : pick;
  }
  if (lane == 0) {
    static_cast<int*>(token_count)[0] = accepted;
    s[round_state::kAccepted] = accepted;
    s[round_state::kBonus] = pick;
    s[round_state::kCacheLength] += accepted;
    s[round_state::kRemaining] -= accepted;
    s[round_state::kRounds] += 1;
  }
}

}  // namespace kp
