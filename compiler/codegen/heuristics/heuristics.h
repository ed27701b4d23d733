#pragma once
// Tuning choices (block sizes, token tiles) per kernel family and GPU arch, kept apart from the
// templates and from the launch code so the speed work can swap them without touching either.
// One table per arch family: sm90.cc (Hopper: H100, H200) and sm120.cc (Blackwell workstation:
// RTX PRO 6000). Each table has one entry per kernel family, keyed by the family's name.
#include <map>
#include <string>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen {

// Sets the tuning parameters a family needs that `p` does not already hold (use p.try_emplace),
// from the problem parameters (dims) in `p`.
using TuneFn = void (*)(ParamValues& p);
using TuningTable = std::map<std::string, TuneFn, std::less<>>;

const TuningTable& sm90_tuning();
const TuningTable& sm120_tuning();

// The table for a canonical arch: sm_100 and newer use sm120's, older ones sm90's.
const TuningTable& tuning_for(std::string_view arch);

// Fills every tuning parameter of `family` that `params` does not already hold (after applying
// the KPLAN_TUNE overrides, tune_override.h, which replace given values too). Throws
// kplan::Error when the arch's table has no entry for the family.
void choose_tuning(const Family& family, std::string_view arch, ParamValues& params);

// Shared rules of thumb (heuristics.cc).
int64_t round_up(int64_t v, int64_t m);
// Threads for a block that walks `work` independent elements: at least one warp, at most 256.
int64_t threads_for(int64_t work);
// Rows of length d: aim for <= 16 values per thread, which keeps rms_norm's row in registers.
int64_t row_threads(int64_t d);
// The dense matmul's tiling (kernels_templates/matmul.cuh) for a GPU of `sms` SMs that should
// hold about `warps_per_sm` warps each: a function of N and K only (instances are chosen before
// the token count is known: one instance serves every bucket, 1 to 64 tokens). With MMA 1 (the
// tokens-as-M instance the op rule adds past the rows-as-M steps) `mma_unroll` k-chunks of 32 are
// in flight per lane and row.
void matmul_tiling(ParamValues& p, int64_t sms, int64_t warps_per_sm, int64_t mma_unroll);
// A compile-time 0/1 switch for measuring (KPLAN_FUSE_ADDS, KPLAN_FUSE_SIBLINGS, KPLAN_MOE_WIDE,
// KPLAN_MLA_SPLIT): `fallback` when `name` is unset; another value than 0 or 1 is refused, naming
// the variable.
bool compile_switch(const char* name, bool fallback);
// A compile-time count for measuring (KPLAN_MATMUL_MMA_MIN_TOKENS, KPLAN_WEIGHT_PREFETCH,
// KPLAN_MLA_MIN_KEYS): `fallback` when `name` is unset; anything but an integer in min..2^20 is
// refused as "<name> must be <what>, not '<value>'".
int64_t compile_count(const char* name, int64_t fallback, const char* what, int64_t min = 0);
// Sibling matmuls (kernels_templates/matmul_siblings.cuh): matmul_tiling's stream (CUDA cores or
// MMA 2) over N + N2 + N3 rows.
void matmul_siblings_tiling(ParamValues& p, int64_t sms, int64_t warps_per_sm);
// KiB from the start of every dense weight that its matmul's blocks ask L2 for before they wait on
// the kernel before them (the family's prologue) where KPLAN_WEIGHT_PREFETCH sets it for a
// compile, to measure; else 0 (the rules' weight_prefetch_after_light_kib decides per matmul).
int64_t weight_prefetch_kib();
// The launch before a matmul's reads at most this many weight bytes (a norm, rope and cache append,
// attention, a per-head matmul): its short, latency-bound run leaves HBM mostly idle.
constexpr int64_t kLightLaunchWeightBytes = int64_t{16} << 20;
// KiB from the start of each batch of a matmul's weight (batch_bytes, `batches` of them: the heads
// of a per-head matmul) that its blocks ask L2 for before the wait, where the launch before it reads
// prev_weight_bytes of weights (-1: none before it in the step): the first 12 MiB of the weight
// (whole batches where they fit) after a light launch, else 0; KPLAN_PREFETCH_AFTER_LIGHT=0
// compiles without (KPLAN_WEIGHT_PREFETCH, set, asks for its KiB of every weight instead).
int64_t weight_prefetch_after_light_kib(int64_t prev_weight_bytes, int64_t batch_bytes, int64_t batches);
// Steps of at least this many tokens take the tensor-core matmul of an [n, k] weight (0: never),
// per arch.
int64_t matmul_mma_min_tokens(std::string_view arch, int64_t n, int64_t k);
// From matmul_mma_min_tokens up to this many tokens a step takes the rows-as-M tensor-core tiles
// (kernels_templates/matmul.cuh MMA 2), past it the tokens-as-M ones (MMA 1), per arch.
int64_t matmul_rows_m_max_tokens(std::string_view arch);
// Steps of at least this many tokens run a dense bf16 matmul of bf16 activations as a cuBLASLt
// call (families/cublaslt_matmul.h) instead of a template (0: never), per arch.
int64_t matmul_library_min_tokens(std::string_view arch);

// The INT4 routed experts' device layout (moe_grouped.cuh's W_LAYOUT): 1, ir/support/int4_frag.h's
// (a warp step reads 512-byte runs already in the MMA's fragment order), where every expert
// matrix is whole octets of rows and 128-column sub-blocks (K2.6's are), else 0 (the
// checkpoint's). Arch-independent: the plan's weights carry one layout for every arch it holds.
// KPLAN_MOE_FRAG=0 keeps the checkpoint's (the shared-memory ring, RING, needs it).
int64_t moe_int4_layout(int64_t hidden, int64_t inter);

// The XB a bf16-activations program's INT4 MoE kernels ask for: 1 stages their activations
// rounded to bf16 (one MMA a k-step, half the shared memory a pair, so the arch's tuning takes
// twice the pairs a chunk) where 0 splits them into bf16 hi + lo (two MMAs, within f32 summation
// order of the CPU op). 1 by default; KPLAN_MOE_XBF16=0 keeps the split.
int64_t moe_x_bf16();
// The tuning the expert kernels of a MoE are instantiated with: {XB: moe_x_bf16()} for INT4
// experts of a program storing bf16 activations, else none (an f32 program's experts split: the
// arch's tuning defaults XB to 0).
ParamValues moe_experts_tuning(bool int4, bool bf16_activations);

// Whether steps of 64+ tokens take the wide tensor-core instance (matmul_kernel's mma_rows 32,
// token tiles of 16) rather than one tile of 64 tokens.
bool matmul_wide_long_steps(std::string_view arch, int64_t n);
// The same weight stream over INT4 g32 rows (kernels_templates/matmul_int4.cuh).
void matmul_int4_tiling(ParamValues& p, int64_t sms, int64_t warps_per_sm);
// Blocks the split MLA partial (kernels_templates/mla_split.cuh) should fill per launch on the
// arch: two per SM (sm_90: 132 SMs, sm_120: 188), so the context splits cover the device in
// one wave. families/mla_split.cc divides it over the step's tokens and head groups.
int64_t mla_split_blocks(std::string_view arch);

// Keys a split of the split MLA pair takes at least: 32 (one staged tile), so a 1-token step
// over a short context still fills the grid (the partial's math binds it, not the cache bytes).
// KPLAN_MLA_MIN_KEYS overrides it for a compile, to measure.
int64_t mla_split_min_keys(std::string_view arch);

// Splits a token of the all-heads partial (MMA 2, 3) takes at most: 64. Each split writes a
// partial of HEADS x (C + 2) f32 (128 KiB at K2.6 width) that the combine reads back, so past that
// the traffic costs more than the splits' parallel keys save (the grid's one block an SM bounds
// it too). KPLAN_MLA_MAX_SPLITS overrides it for a compile, to measure.
int64_t mla_split_wide_max_splits(std::string_view arch);

// The largest step (tokens) whose mla_attention lowers to the split pair (mla_split_partial +
// mla_split_combine) rather than one mla_attention launch: 8 (the H200 measured the pair 5-10x
// faster at 1 token, 0.8x at 64); with an all-heads partial (`wide`, MMA 2) kMlaWideMaxTokens
// (64: 9-14x faster than mla_attention at 1-64 tokens on an H100).
// KPLAN_MLA_SPLIT overrides it for a compile: 0 never, 1 every step.
int64_t mla_split_max_tokens(std::string_view arch, bool wide = false);

// Whether the split MLA partial (kernels_templates/mla_split.cuh) takes MMA 2 (every head a block
// on the tensor cores) for these problem parameters: where it fits (a bf16 cache, heads by 16
// whose queries and 3-tile ring fit the shared memory, C in n-tile pairs over HEADS / 8 warps), by
// default; KPLAN_MLA_WIDE=0 keeps the CUDA-core partial for a compile, to measure.
bool mla_split_wide(const ParamValues& p);

// The INT4 grouped MoE's many-token tuning (tensor-core m-tiles of 32 rows a warp, more pairs a
// chunk): with KPLAN_MOE_WIDE=1 steps of at least moe_wide_min_tokens(arch) tokens take it (0: none,
// the default), its gate/up and down parameters from moe_wide_tuning (a measured variant, the
// rest the table's).
int64_t moe_wide_min_tokens(std::string_view arch);
ParamValues moe_wide_tuning(std::string_view arch, bool down, const ParamValues& also = {});

}  // namespace kplan::codegen
