#include "compiler/codegen/heuristics/heuristics.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>

#include "compiler/codegen/families/mla_split.h"
#include "compiler/codegen/heuristics/tune_override.h"
#include "ir/support/int4_frag.h"
#include "ir/support/error.h"

namespace kplan::codegen {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
int64_t threads_for(int64_t work) { return std::clamp<int64_t>(round_up(work, 32), 32, 256); }
int64_t row_threads(int64_t d) { return std::clamp<int64_t>(round_up((d + 15) / 16, 32), 128, 1024); }

bool compile_switch(const char* name, bool fallback) {
  const char* env = std::getenv(name);
  if (!env) return fallback;
  if (std::string_view(env) == "0" || std::string_view(env) == "1") return env[0] == '1';
  throw Error(std::string(name) + " must be 0 or 1, not '" + env + "'");
}

int64_t compile_count(const char* name, int64_t fallback, const char* what, int64_t min) {
  const char* env = std::getenv(name);
  if (!env) return fallback;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (end == env || *end || v < min || v > 1 << 20) throw Error(std::string(name) + " must be " + what + ", not '" + env + "'");
  return v;
}

int64_t weight_prefetch_kib() {
  // Every weight's start, for measuring: 64 KiB a block (every block's rows) cost the K2.6 slice's
  // 1-token step 0.14 ms, and the first 4 or 16 MiB of each weight measured within noise
  // (bench/RESULTS.md 2026-12-04 16:55). The default asks only after light launches
  // (weight_prefetch_after_light_kib).
  return compile_count("KPLAN_WEIGHT_PREFETCH", 0, "KiB of a weight in 0..1048576 (0: none)");
}

int64_t weight_prefetch_after_light_kib(int64_t prev_weight_bytes, int64_t batch_bytes, int64_t batches) {
  // Measured on an H100 (bench/RESULTS.md, sessions 41-42): W_UK whole after rope-append, W_UV
  // whole after the combine, q_b's first 12 MiB after its norm, o_proj's after W_UV took 0.7% off
  // the K2.6 slice's 1-token step in four alternating runs (and 0.2% off 16 tokens); asking for
  // every weight's start (even after a weight stream, whose bandwidth it then competes for) was
  // within noise on the H200 (2026-12-04).
  constexpr int64_t kBudget = int64_t{12} << 20;
  if (std::getenv("KPLAN_WEIGHT_PREFETCH") || !compile_switch("KPLAN_PREFETCH_AFTER_LIGHT", true)) return 0;
  if (prev_weight_bytes < 0 || prev_weight_bytes > kLightLaunchWeightBytes || batch_bytes <= 0 || batches <= 0) return 0;
  return (std::min(batch_bytes, kBudget / batches) + 1023) / 1024;
}

void matmul_tiling(ParamValues& p, int64_t sms, int64_t warps_per_sm, int64_t mma_unroll) {
  auto set = [&](const char* name, int64_t v) { p.try_emplace(name, v); };
  set("MMA", 0);
  set("PREFETCH", weight_prefetch_kib());
  set("XPF", 0);
  if (p.at("MMA") == 1) {
    // Tokens as mma's M (asked for by the op rule past the rows-as-M steps, with their TOK_TILE): 16
    // rows a warp (2 n-tiles; x's loads reused twice from registers, by the other row groups of
    // the block from L1), split K until the grid holds `want` warps while each warp keeps 2
    // rounds of loads.
    // lm_head-wide N (65536+ rows: thousands of row blocks either way) takes 32 rows a warp, x's
    // loads reused 4 times: 1.064 against 1.305 ms at 16 tokens for K2.6's lm_head
    // (GpuOps.MatmulVariantSweepAtK26Shapes, bench/RESULTS.md 2026-12-02 02:35-03:15).
    const int64_t n = p.at("N"), chunks = (p.at("K") + 31) / 32, want = sms * warps_per_sm;
    set("RPW", n >= 65536 ? 32 : 16);
    const int64_t rpw = p.at("RPW");
    set("UNROLL", mma_unroll);
    int64_t ksplit = 1;
    while (ksplit < 8 && (n + rpw - 1) / rpw * ksplit < want && chunks / (2 * ksplit) >= 2 * mma_unroll) ksplit *= 2;
    set("KSPLIT", ksplit);
    set("WARPS", std::max<int64_t>(4, p.at("KSPLIT")));  // KSPLIT may be preset (the wide instance: 1)
    set("TOK_TILE", 16);
    return;
  }
  if (p.at("MMA") == 2) {
    // Rows as mma's M (asked for by the op rule for the few-token steps, with their TOK_TILE).
    // Measured on the H100 (bench/RESULTS.md 2026-12-06 04:20, GpuOps.MatmulRowsAsMAtK26Shapes):
    // K split 8 ways won at every K2.6 shape whose K holds it (8 warps a block, each with 2+ rounds
    // of loads: q_b's K = 1536 takes 4), even where the grid held enough warps without it
    // (lm_head at 8 tokens 0.800 ms with KSPLIT 8 against 1.131 with 1); 32 rows a warp (4
    // rounds of 16-byte loads in flight, each x fragment feeding 2 MMAs) at token tiles of 16 for
    // N of 4096+ (o_proj 0.063 against 0.088 ms with 16 rows, the dense down 0.142 against 0.197),
    // and at tiles of 8 for lm_head-wide N or short K (shexp_down's 2048: 0.0110 against 0.0155;
    // q_b); 16 rows a warp, 8 rounds in flight, elsewhere (o_proj at 8 tokens 0.0485 against
    // 0.0504, q_a's 1536 rows 0.0188 against 0.0288).
    const int64_t n = p.at("N"), k = p.at("K"), chunks = (k + 31) / 32, tok = p.count("TOK_TILE") ? p.at("TOK_TILE") : 8;
    set("RPW", (tok >= 16 ? n >= 4096 : n >= 65536 || (k <= 2048 && n >= 4096)) ? 32 : 16);
    // A row space of at most one 16-row group an SM (q_a + kv_a's 2112 rows) splits K 16 ways with
    // 4 rounds in flight: twice the warps an SM holding the same loads (its 16-token launch 0.031
    // against 0.049 ms in the slice, bench/RESULTS.md 2026-12-06 04:44).
    const bool narrow = p.at("RPW") == 16 && (n + 15) / 16 <= sms && chunks / 16 >= 2 * 4;
    set("UNROLL", p.at("RPW") >= 32 || narrow ? 4 : 8);
    int64_t ksplit = narrow ? 16 : 8;
    while (ksplit > 1 && chunks / ksplit < 2 * p.at("UNROLL")) ksplit /= 2;
    set("KSPLIT", ksplit);
    set("WARPS", std::max<int64_t>(4, p.at("KSPLIT")));
    set("TOK_TILE", 8);
    return;
  }
  if (p.at("W_LAYOUT") != 0) {
    // [K, N] (the absorbed W_UK: 64 heads of [128, 512] at K2.6, 8 MiB a step): a column stream,
    // 8 columns a lane (a warp covers 256 columns in one 512-byte run per k row), K split over 8
    // warps (16 k rows a warp at K = 128), 2 tokens a tile (the slices' partial sums: 16 KiB of
    // shared memory). 16 columns a lane (RPW 2) gave K2.6's 64 heads one block each, 64 blocks for
    // 132 SMs: 18.6 us a step, 11% of the floor (bench/RESULTS.md 2026-12-02 ~16:00); 8 a lane
    // gives each head two.
    // Each warp's k rows all in flight at once (UNROLL up to 16: one round trip at K = 128, where
    // 4 rows at a time took 4 and held W_UK at 18% of its floor in the K2.6 1-token step).
    const int64_t k = p.at("K");
    set("RPW", 1);
    int64_t ksplit = 1;
    while (ksplit < 8 && k / (2 * ksplit) >= 4 * 4) ksplit *= 2;
    set("KSPLIT", ksplit);
    set("UNROLL", std::clamp<int64_t>((k + p.at("KSPLIT") - 1) / p.at("KSPLIT"), 1, 16));
    set("WARPS", std::max<int64_t>(4, ksplit));
    set("TOK_TILE", ksplit > 1 ? 2 : 4);
    return;
  }
  const int64_t n = p.at("N"), k = p.at("K");
  if (p.count("TOK_TILE") && p.at("TOK_TILE") <= 2) {
    // The 1-token (AR decode) and 2..8-token instances: 1 or 2 accumulators a row keep a warp at
    // 64-128 registers (5-8 blocks an SM against 3 with 8-token tiles), 4 rows a warp, K split
    // over the block's 4 warps (1 token) or 2 (2 tokens; 2 row groups a block) while every lane
    // keeps a load a slice. Measured on the H200 (bench/RESULTS.md 2026-12-02 02:35-03:15,
    // GpuOps.MatmulVariantSweepAtK26Shapes) at K2.6's dense shapes, against 8-token tiles:
    // 1 token o_proj 0.0294 ms (93% of 4.3 TB/s) against 0.0430, the dense down 0.0640 against
    // 0.0886, q_a 0.0065 against 0.0129; 8 tokens as 4 tiles of 2: o_proj 0.0761 against 0.1282,
    // the dense down 0.1790 against 0.2732.
    const int64_t chunks = k / 8;
    int64_t ksplit = p.at("TOK_TILE") == 1 ? 4 : 2;
    while (ksplit > 1 && chunks / ksplit < 32) ksplit /= 2;
    set("RPW", 4);
    set("UNROLL", 4);
    set("KSPLIT", ksplit);
    set("WARPS", 4);
    return;
  }
  set("TOK_TILE", 8);  // 8 tokens share each weight load; 64 tokens are 8 tiles side by side
  // Rows per warp: each x value read from L1 feeds RPW rows (at 8 tokens x's L1 traffic is
  // 16 / RPW bytes per weight byte), but fewer warps cover N; 4 rows * 8 tokens = 32
  // accumulators + 4 * UNROLL 16-byte loads stay in registers.
  // Measured on the H200 (bench/RESULTS.md 2026-12-01 22:49, GpuOps.MatmulVariantSweepAtK26Shapes):
  // 4 rows a warp win from N = 7168 on even where the grid then holds fewer warps than `want`
  // (o_proj 8192 x 7168 at 1 token: 0.043 ms against 0.061 with 1 row; q_b's 12288 rows: 0.0139
  // against 0.0147 with 2): the bytes in flight per warp matter more than the warps.
  const int64_t want = sms * warps_per_sm;
  const int64_t rpw = 2 * n >= 3 * want ? 4 : n >= want ? 2 : 1;
  set("RPW", rpw);
  // 16-byte loads in flight per lane and row: 4 (4 rows), 8 (2 rows, 1 row): 128-256 bytes per
  // lane, 4-8 KiB per warp, before the first FMA.
  const int64_t unroll = rpw == 4 ? 4 : 8;
  set("UNROLL", unroll);
  // Narrow N (1 row a warp): split K across the warps of a block until the grid holds `want` warps, while each warp's
  // slice keeps at least half a round of loads (16 lanes * UNROLL chunks of 8 weights).
  const int64_t chunks = k / 8;
  int64_t ksplit = 1;
  while (rpw == 1 && ksplit < 8 && n * ksplit < want && chunks / (2 * ksplit) >= 16 * unroll) ksplit *= 2;
  set("KSPLIT", ksplit);
  // 4 warps a block (finer blocks fill SMs whose registers hold 2-3 of them), 8 with KSPLIT 8.
  set("WARPS", std::max<int64_t>(4, ksplit));
}

void matmul_siblings_tiling(ParamValues& p, int64_t sms, int64_t warps_per_sm) {
  // The dense matmul's stream (CUDA cores, or MMA 2's rows-as-M tiles) over the siblings' rows
  // taken together (one row space).
  static const char* const kTuning[] = {"WARPS", "TOK_TILE", "RPW", "KSPLIT", "UNROLL", "MMA", "XPF"};
  p.try_emplace("MMA", 0);
  ParamValues m = {{"K", p.at("K")}, {"N", p.at("N") + p.at("N2") + p.at("N3")}, {"W_LAYOUT", 0}};
  for (const char* name : kTuning)
    if (p.count(name)) m[name] = p.at(name);
  const ParamValues given = m;
  matmul_tiling(m, sms, warps_per_sm, 2);
  if (p.count("GLU") && p.at("GLU") == 1 && m.at("RPW") % 2 == 1 && !given.count("RPW")) {
    m = given;  // a gate and up pair in one warp's rows: 2 rows a warp where the tiling chose 1
    m["RPW"] = 2;
    matmul_tiling(m, sms, warps_per_sm, 2);
  }
  for (const char* name : kTuning) p.try_emplace(name, m.at(name));
}

bool matmul_wide_long_steps(std::string_view arch, int64_t n) {
  // Steps of 64+ tokens over 4096+ rows: token tiles of 16 side by side with 32 rows a warp and no
  // K split (the 4+ tiles fill the grid) beat one 64-token tile on sm_90 (bench/RESULTS.md
  // 2026-12-02 02:35-03:15, at 64 tokens): lm_head 2.64 against 5.05 ms, mlp_up 0.392 against
  // 0.629, the dense down 0.467 against 0.686, o_proj 0.237 against 0.311, q_b 0.058 against
  // 0.097. Under 4096 rows (kv_a, q_a, the shared expert's up) the 64-token tile stays ahead.
  // sm_120 is not measured: it keeps the 64-token tile.
  return arch == "sm_90" && n >= 4096;
}

int64_t matmul_mma_min_tokens(std::string_view arch, int64_t n, int64_t k) {
  // From 4 tokens on the rows-as-M tensor-core tiles (kernels_templates/matmul.cuh MMA 2, up to
  // matmul_rows_m_max_tokens) beat the CUDA cores' 2-token tiles, 8 FMAs a weight a tile, at every
  // K2.6 shape but q_a (bench/RESULTS.md 2026-12-06 04:20, H100: 4 tokens o_proj 0.047 against
  // 0.051 ms, the dense down 0.103 against 0.116, shexp_down 0.011 against 0.015); at 2 tokens the
  // CUDA cores keep them (q_a 0.0113 against 0.0185, o_proj 0.0457 against 0.0469). Under 4 M
  // weights (the bundled pair's 192-wide model) the CUDA-core stream is faster at every step size
  // (bench/RESULTS.md 2026-12-01 20:20: DDTree 15 at 5718 against 4474 tokens/s): small weights
  // stay there. 0 keeps every step on the CUDA cores; KPLAN_MATMUL_MMA_MIN_TOKENS overrides it for a
  // compile, so a device run can sweep both (tools/device/width_check.sh).
  (void)tuning_for(arch);  // refuses an arch with no table
  return compile_count("KPLAN_MATMUL_MMA_MIN_TOKENS", n * k >= (int64_t{1} << 22) ? 4 : 0, "a token count >= 0 (0: never)");
}

int64_t matmul_rows_m_max_tokens(std::string_view arch) {
  // Rows as mma's M pad only the tokens (to 8) and feed each x fragment to 2 MMAs; tokens as M
  // pad them to 16. Measured on the H100 (bench/RESULTS.md 2026-12-06 04:20) at K2.6's dense
  // shapes, rows as M in token tiles of 16 against tokens as M: 16 tokens o_proj 0.063 against
  // 0.093 ms, the dense up 0.126 against 0.180, lm_head 0.97 against 1.28; 32 tokens (two tiles)
  // o_proj 0.103 against 0.152, lm_head 1.54 against 1.49. Up to 32 tokens then (sm_120 is not
  // measured: the same); KPLAN_MATMUL_ROWS_M_MAX moves the boundary for a compile, to measure.
  (void)tuning_for(arch);
  return compile_count("KPLAN_MATMUL_ROWS_M_MAX", 32, "a token count >= 0", 0);
}

int64_t matmul_library_min_tokens(std::string_view arch) {
  // cuBLASLt's tiles against the templates' at K2.6 width (H100, the 3-layer INT4 slice, context
  // 512; bench/RESULTS.md 2026-12-06 session 37): steps of 4 / 8 / 16 / 32 / 64 / 256 tokens 2.118 /
  // 2.484 / 2.810 / 3.997 / 5.298 / 18.14 ms against the templates' 2.190 / 2.584 / 2.940 / 4.745 /
  // 8.344 / 27.82 (lm_head at 64 tokens 0.80 against 2.06 ms). From 4 tokens then, where the
  // tensor-core path begins (matmul_mma_min_tokens; sm_120 is not measured: the same);
  // KPLAN_CUBLASLT_MIN_TOKENS moves it for a compile (0: never), to measure.
  (void)tuning_for(arch);
  return compile_count("KPLAN_CUBLASLT_MIN_TOKENS", 4, "a token count >= 0 (0: never)", 0);
}

void matmul_int4_tiling(ParamValues& p, int64_t sms, int64_t warps_per_sm) {
  auto set = [&](const char* name, int64_t v) { p.try_emplace(name, v); };
  // 32 dequantised products per group and token: 4 tokens a tile, 2 rows a warp keep the
  // accumulators and per-group partial sums (2 * RPW * TOK_TILE) in registers.
  set("TOK_TILE", 4);
  const int64_t n = p.at("N"), groups = p.at("K") / 32;
  const int64_t want = sms * warps_per_sm;
  const int64_t rpw = n >= 2 * want ? 2 : 1;
  set("RPW", rpw);
  const int64_t unroll = 4;  // 4 groups = 64 bytes of packed weights in flight per lane and row
  set("UNROLL", unroll);
  int64_t ksplit = 1;
  while (ksplit < 8 && (n + rpw - 1) / rpw * ksplit < want && groups / (2 * ksplit) >= 16 * unroll) ksplit *= 2;
  set("KSPLIT", ksplit);
  set("WARPS", std::max<int64_t>(4, ksplit));
}

int64_t mla_split_blocks(std::string_view arch) { return &tuning_for(arch) == &sm120_tuning() ? 2 * 188 : 2 * 132; }

const TuningTable& tuning_for(std::string_view arch) {
  int major = 0;
  if (arch.size() > 3 && arch.substr(0, 3) == "sm_") {
    const std::string_view digits = arch.substr(3);
    std::from_chars(digits.data(), digits.data() + digits.size(), major);
  }
  if (major == 0) throw Error("codegen: no tuning for arch '" + std::string(arch) + "' (expected sm_NN)");
  return major >= 100 ? sm120_tuning() : sm90_tuning();
}

void choose_tuning(const Family& family, std::string_view arch, ParamValues& params) {
  const TuningTable& table = tuning_for(arch);
  auto it = table.find(family.name);
  if (it == table.end()) throw Error("codegen: heuristics for " + std::string(arch) + " have no entry for kernel family " + family.name);
  apply_tune_overrides(env_tune_overrides(), family, params);  // KPLAN_TUNE, for measuring variants
  it->second(params);
}

int64_t mla_split_min_keys(std::string_view arch) {
  (void)tuning_for(arch);  // refuses an arch with no table
  // 128 keys a split (until 2026-12-04) gave the K2.6 slice's 1-token step 9 splits over 512 keys
  // (72 blocks, 2 tiles each): 51 us for 3 layers' partials, the blocks' f32 score and value math
  // serial per warp. One tile a split lets the grid's 2 blocks an SM take the keys side by side.
  // The all-heads partial took 128 too until 2026-12-06 (session 39): over 512 keys its 17 one-tile
  // splits beat 9 of two tiles (H100, K2.6 3-layer slice, 1.5436 against 1.5503 ms); its long
  // contexts are bounded by mla_split_wide_max_splits instead.
  return compile_count("KPLAN_MLA_MIN_KEYS", 32, "a key count >= 1", 1);  // 0 would divide by zero
}

int64_t mla_split_wide_max_splits(std::string_view arch) {
  (void)tuning_for(arch);  // refuses an arch with no table
  // Each all-heads split writes HEADS x (C + 2) f32 (128 KiB at K2.6 width) that the combine reads
  // back: past ~64 splits a token that traffic costs more than the splits' parallel keys save.
  // Measured on an H100 (bench/RESULTS.md 2026-12-06 session 39, K2.6 3-layer INT4 slice, 1 token,
  // ms a step): 4096 keys over 129 / 65 / 33 / 17 splits 1.6131 / 1.5723 / 1.5784 / 1.6157; 16384
  // keys over 132 / 65 / 33 splits 1.6519 / 1.6371 / 1.7084.
  return compile_count("KPLAN_MLA_MAX_SPLITS", 64, "a split count >= 1", 1);
}

namespace {
// The all-heads split MLA (MMA 2): whether it is the default where it fits, and the largest step
// that takes the split pair with it. Measured on an H100 (bench/RESULTS.md 2026-12-06,
// GpuOps.MlaSplitAtK26WidthFigures, K2.6 width, bf16 cache): the pair takes 0.031 / 0.054 / 0.081 /
// 0.236 ms at 1 / 8 / 16 / 64 tokens over 4096 keys, where the CUDA-core pair takes 0.058 / 0.360 /
// 0.705 / 2.76 and the one-launch mla_attention 0.399 / 0.480 / 0.793 / 2.87; over 32768 keys
// 0.068 / 0.231 / 0.433 / 1.63 against 0.355 / 2.77 / 5.52 / 21.8 (the CUDA-core pair).
constexpr bool kMlaWideDefault = true;
constexpr int64_t kMlaWideMaxTokens = 64;
}  // namespace

int64_t mla_split_max_tokens(std::string_view arch, bool wide) {
  (void)tuning_for(arch);  // refuses an arch with no table
  // Measured on the H200 (bench/RESULTS.md 2026-12-02 08:10, GpuOps.MlaSplitAtK26WidthFigures):
  // at 1 token the pair takes 0.076 against 0.390 ms over 4096 keys, 0.51 against 4.9 ms over
  // 32768 (the cache read once per 8 heads, splits filling the SMs); at 64 tokens (one split,
  // the grid full of tokens already) 3.5 against 2.8 ms. Up to 8 tokens a step still has 4+
  // splits. sm_120 is not measured: the same rule.
  if (!std::getenv("KPLAN_MLA_SPLIT")) return wide ? kMlaWideMaxTokens : 8;
  return compile_switch("KPLAN_MLA_SPLIT", false) ? std::numeric_limits<int64_t>::max() : 0;
}

bool mla_split_wide(const ParamValues& p) {
  const bool fits = mla_split_all_heads_misfit(p.at("HEADS"), p.at("C"), p.at("R"), p.at("KV_DT"), 2).empty();
  return fits && compile_switch("KPLAN_MLA_WIDE", kMlaWideDefault);
}

int64_t moe_int4_layout(int64_t hidden, int64_t inter) {
  const bool fits = int4_frag::fits(inter, hidden, 32) && int4_frag::fits(hidden, inter, 32);
  return fits && compile_switch("KPLAN_MOE_FRAG", true) ? 1 : 0;
}

int64_t moe_x_bf16() {
  // Measured on an H100 (bench/RESULTS.md 2026-12-05 18:44–19:27): the K2.6-width experts with XB 1,
  // NT 8 / 16 and PF 2 took 84.6 / 158.9 / 163.3 / 196.8 / 244.0 us at 1 / 2 / 4 / 8 / 16 tokens
  // against the split's 89.8 / 169.2 / 171.5 / 224.7 / 445.2 (GpuOps.MoeGroupedKimiK26WidthInt4).
  return compile_switch("KPLAN_MOE_XBF16", true) ? 1 : 0;
}

ParamValues moe_experts_tuning(bool int4, bool bf16_activations) {
  return int4 && bf16_activations ? ParamValues{{"XB", moe_x_bf16()}} : ParamValues{};
}

int64_t moe_wide_min_tokens(std::string_view arch) {
  // Measured on the H200 (bench/RESULTS.md 2026-12-02, call 4, GpuOps.MoeGroupedKimiK26WidthInt4):
  // gate/up ROWS 16 NT 4 + down ROWS 32 NT 16 take 244 against 257 us at 8 tokens, 366 against
  // 514 at 16, and lose at 1-4 tokens (114 against 96 at 1). sm_120 (99 KiB of shared memory a
  // block) cannot stage down's 16 pairs of 2048 f32: no wide tuning there.
  // Inside the K2.6 slice's plan, though, it lost: 4.830 against 4.599 ms at 16 tokens, even at 8
  // (bench/RESULTS.md 2026-12-04), so it is opt-in: KPLAN_MOE_WIDE=1 for a compile (measuring).
  if (!compile_switch("KPLAN_MOE_WIDE", false)) return 0;
  return &tuning_for(arch) == &sm90_tuning() ? 8 : 0;
}

ParamValues moe_wide_tuning(std::string_view arch, bool down, const ParamValues& also) {
  if (moe_wide_min_tokens(arch) == 0) throw Error("moe_wide_tuning: " + std::string(arch) + " has no many-token MoE tuning");
  ParamValues p = down ? ParamValues{{"WARPS", 8}, {"ROWS", 32}, {"NT", 16}, {"PF", 1}, {"BLOCKS", 264}, {"MMA", 1}, {"RING", 0}}
                       : ParamValues{{"WARPS", 8}, {"ROWS", 16}, {"NT", 4}, {"PF", 1}, {"BLOCKS", 264}, {"MMA", 1}, {"RING", 0}};
  for (const auto& [name, value] : also) p[name] = value;
  return p;
}

}  // namespace kplan::codegen
