// NVRTC compiles every kernel template family, for every arch kplan ships (sm_90 Hopper, sm_120
// Blackwell), at the widths of the test checkpoints (tiny, tiny2: odd dims) and of Kimi K2.6.
// Each cubin must be an ELF image holding the instance's entry symbol. CI has no GPU: numerical
// checks of these kernels against the CPU reference run on the device machine (runtime tests).
#include <gtest/gtest.h>

#include <set>

#include "codegen_test_util.h"
#include "compiler/codegen/compile_kernels.h"
#include "compiler/codegen/families/all.h"
#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/codegen/instantiate.h"
#include "compiler/codegen/model_kernels.h"
#include "compiler/codegen/nvrtc_compile.h"

namespace kplan::codegen {
namespace {

using testing_util::TempDir;
using testing_util::test_config;
using testing_util::test_draft_config;

const std::vector<std::string> kArchs = {"sm_90", "sm_120"};

// Compiles with a fresh cache (so NVRTC really runs) and checks every cubin.
void compile_and_check(const std::vector<KernelSource>& sources) {
  TempDir cache;
  CompileOptions options;
  options.archs = kArchs;
  options.cache_dir = cache.path();
  options.progress = [](const std::string&) {};
  CompileStats stats;
  const std::vector<KernelInstance> out = compile_kernels(sources, options, &stats);
  ASSERT_EQ(out.size(), sources.size() * kArchs.size());
  EXPECT_EQ(stats.misses, static_cast<int>(out.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const KernelInstance& k = out[i];
    EXPECT_EQ(k.src.id, sources[i / kArchs.size()].id);
    EXPECT_EQ(k.arch, kArchs[i % kArchs.size()]);
    EXPECT_EQ(k.id, k.src.id + (k.arch == "sm_90" ? "_sm90" : "_sm120"));
    ASSERT_GT(k.cubin.size(), 64u) << k.id;
    EXPECT_EQ(k.cubin[0], 0x7f) << k.id;
    EXPECT_EQ(k.cubin[1], 'E') << k.id;
    EXPECT_EQ(k.cubin[2], 'L') << k.id;
    EXPECT_EQ(k.cubin[3], 'F') << k.id;
    EXPECT_TRUE(cubin_has_entry(k.cubin, k.entry())) << k.id;
    EXPECT_EQ(k.cache_key.size(), 16u);
  }
}

std::set<std::string> families_of(const std::vector<KernelSource>& sources) {
  std::set<std::string> f;
  for (const KernelSource& k : sources) f.insert(k.family);
  return f;
}

// The tiny checkpoint's whole target program, its drafter, and its INT4-experts variant.
TEST(CodegenCompile, TinyTargetAndDrafterAllKernels) {
  ModelConfig c = test_config("tiny");
  std::vector<KernelSource> sources = target_model_kernels(c, {});
  for (KernelSource& k : draft_model_kernels(test_draft_config("draft-tiny"), {}, 4)) sources.push_back(std::move(k));
  compile_and_check(sources);
}

TEST(CodegenCompile, TinyInt4Experts) {
  ModelConfig c = test_config("tiny");
  compile_and_check({moe_grouped_gate_up_kernel(c.hidden_size, c.moe_intermediate_size, c.n_routed_experts, c.num_experts_per_tok, true,
                                                ElemType::F32),
                     moe_grouped_down_kernel(c.hidden_size, c.moe_intermediate_size, c.n_routed_experts, c.num_experts_per_tok, true),
                     matmul_int4_kernel(c.hidden_size, c.moe_intermediate_size, ElemType::F32, ElemType::F32)});
}

// The grouped experts' tensor-core path (MMA 1: mma.sync, ldmatrix, bf16x2 FMA) at K2.6 width,
// one and two m-tiles a warp, one and two n-tiles a chunk, both scale schemes (MMA 1, 2), PF 0..3,
// the shared-memory ring (RING 2..4) by cp.async and by the copy engine (TMA 1).
TEST(CodegenCompile, MoeGroupedMmaInstances) {
  const ParamValues dims = {{"H", 7168}, {"I", 2048}, {"E", 384}, {"TOPK", 8}, {"W_FMT", 1}};
  auto with = [&](ParamValues p) {
    p.insert(dims.begin(), dims.end());
    if (p.count("X_DT")) p.insert({{"ROUTE", 0}, {"RNORM", 0}});  // gate/up: reads the router's ids
    p.insert({"W_LAYOUT", 0});
    return p;
  };
  compile_and_check({instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 4}, {"PF", 1}, {"MMA", 1}}), "sm_90"),
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 16}, {"NT", 3}, {"PF", 0}, {"MMA", 1}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 16}, {"PF", 1}, {"MMA", 1}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 32}, {"NT", 8}, {"PF", 1}, {"MMA", 1}}), "sm_90"),
                     // Each lane's own scales (MMA 2) and deeper load rings (PF 2, 3).
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 4}, {"PF", 2}, {"MMA", 2}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 8}, {"PF", 3}, {"MMA", 2}}), "sm_90"),
                     // The 128 + q forms (MMA 3, 4), with two n-tiles (NT 16) too, and on sm_120.
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 4}, {"PF", 1}, {"MMA", 3}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 16}, {"PF", 1}, {"MMA", 4}}), "sm_90"),
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 4}, {"PF", 1}, {"MMA", 3}}), "sm_120"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 8}, {"PF", 1}, {"MMA", 4}}), "sm_120"),
                     // The shared-memory ring (cp.async, RING stages a warp) with each scheme's math, on both arches.
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"WARPS", 16}, {"ROWS", 8}, {"NT", 4}, {"PF", 0}, {"MMA", 2}, {"RING", 3}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 8}, {"PF", 0}, {"MMA", 1}, {"RING", 4}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 16}, {"PF", 0}, {"MMA", 4}, {"RING", 2}}), "sm_90"),
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 1}, {"PF", 0}, {"MMA", 2}, {"RING", 2}}), "sm_120"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 3}, {"PF", 0}, {"MMA", 1}, {"RING", 3}}), "sm_120"),
                     // The router folded in (ROUTE 64: 4 passes of 16 warps; RNORM 1), with the ring, on both arches.
                     instantiate(moe_grouped_gate_up::family(),
                                 with({{"X_DT", 0}, {"WARPS", 16}, {"ROWS", 8}, {"NT", 4}, {"PF", 0}, {"MMA", 2}, {"RING", 3}, {"ROUTE", 64}, {"RNORM", 1}}), "sm_90"),
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 1}, {"PF", 1}, {"MMA", 2}, {"ROUTE", 16}, {"RNORM", 1}}), "sm_120"),
                     // The experts in int4_frag order (W_LAYOUT 1): both scale schemes, two m-tiles a warp, the 128 + q forms, both arches.
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"WARPS", 16}, {"ROWS", 8}, {"NT", 4}, {"PF", 1}, {"MMA", 2}, {"ROUTE", 16}, {"RNORM", 1}, {"W_LAYOUT", 1}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 8}, {"PF", 1}, {"MMA", 1}, {"W_LAYOUT", 1}}), "sm_90"),
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 16}, {"NT", 4}, {"PF", 1}, {"MMA", 3}, {"W_LAYOUT", 1}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 32}, {"NT", 16}, {"PF", 2}, {"MMA", 4}, {"W_LAYOUT", 1}}), "sm_90"),
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 1}, {"PF", 1}, {"MMA", 2}, {"W_LAYOUT", 1}}), "sm_120"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 3}, {"PF", 1}, {"MMA", 1}, {"W_LAYOUT", 1}}), "sm_120"),
                     // The int4_frag ring's copies by the copy engine (TMA 1: cp.async.bulk onto mbarriers), routed, both arches.
                     instantiate(moe_grouped_gate_up::family(),
                                 with({{"X_DT", 0}, {"WARPS", 16}, {"ROWS", 8}, {"NT", 4}, {"PF", 0}, {"MMA", 2}, {"RING", 4}, {"ROUTE", 64}, {"RNORM", 1}, {"W_LAYOUT", 1}, {"XB", 1}, {"TMA", 1}}), "sm_90"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 8}, {"PF", 0}, {"MMA", 1}, {"RING", 4}, {"W_LAYOUT", 1}, {"XB", 1}, {"TMA", 1}}), "sm_90"),
                     instantiate(moe_grouped_gate_up::family(), with({{"X_DT", 0}, {"ROWS", 8}, {"NT", 1}, {"PF", 0}, {"MMA", 2}, {"RING", 2}, {"W_LAYOUT", 1}, {"TMA", 1}}), "sm_120"),
                     instantiate(moe_grouped_down::family(), with({{"ROWS", 16}, {"NT", 3}, {"PF", 0}, {"MMA", 1}, {"RING", 3}, {"W_LAYOUT", 1}, {"TMA", 1}}), "sm_120")});
}

// tiny2: every dim odd or unaligned where the architecture allows (intermediate 333, v_head 20,
// 6 heads, no q_lora): the scalar (non-vector) paths of the templates.
TEST(CodegenCompile, Tiny2OddWidths) {
  const std::vector<KernelSource> sources = target_model_kernels(test_config("tiny2"), {});
  EXPECT_TRUE(families_of(sources).count("mla_attention"));
  compile_and_check(sources);
}

// tiny-yarn: group-limited routing (n_group 4).
TEST(CodegenCompile, TinyYarnGroupRouter) {
  ModelConfig c = test_config("tiny-yarn-rope-parameters");
  c.n_routed_experts = 16;
  c.num_experts_per_tok = 4;
  c.n_group = 4;
  c.topk_group = 2;
  compile_and_check({moe_router_kernel(c)});
}

// Kimi K2.6 widths with bf16 storage: one instance per family (the rest differ only in
// constants), including the ones whose register / shared-memory use grows with width.
TEST(CodegenCompile, KimiK26WidthsOnePerFamily) {
  ModelConfig c = test_config("kimi-k2.6");
  c.quant.enabled = true;
  const StorageChoice bf16{ElemType::BF16, ElemType::BF16};
  std::vector<KernelSource> sources;
  std::set<std::string> seen;
  for (KernelSource& k : target_model_kernels(c, bf16)) {
    if (seen.insert(k.family).second || k.family == "rope") sources.push_back(std::move(k));
  }
  DraftConfig d = test_draft_config("draft-tiny");
  d.hidden_size = c.hidden_size;
  d.num_attention_heads = 32;
  d.num_key_value_heads = 8;
  d.head_dim = 128;
  d.vocab_size = c.vocab_size;
  for (KernelSource& k : draft_model_kernels(d, bf16, 8)) {
    if (seen.insert(k.family).second) sources.push_back(std::move(k));
  }
  sources.push_back(matmul_int4_kernel(c.hidden_size, c.moe_intermediate_size, ElemType::BF16, ElemType::BF16));
  // bf16 routed experts at K2.6 width (the INT4 ones come from the model's kernels above).
  sources.push_back(moe_grouped_gate_up_kernel(c.hidden_size, c.moe_intermediate_size, c.n_routed_experts, c.num_experts_per_tok, false,
                                               ElemType::BF16));
  sources.push_back(moe_grouped_down_kernel(c.hidden_size, c.moe_intermediate_size, c.n_routed_experts, c.num_experts_per_tok, false));
  sources.push_back(matmul_kernel(c.qk_nope_head_dim, c.kv_lora_rank, ElemType::BF16, ElemType::BF16, true));
  // The router beside the shared expert's gate and up with their swiglu (GLU 1), bf16 outputs at 8 tokens.
  sources.push_back(matmul_siblings_kernel(c.hidden_size, c.n_routed_experts, c.moe_intermediate_size, c.moe_intermediate_size,
                                           ElemType::BF16, ElemType::BF16, kDefaultArch, 0, true));
  // The dense matmul's tokens-as-M instances (MMA 1, the longer steps): lm_head width, f32 and bf16
  // x, tiles of 16 and 64 tokens, split-K (kv_a), ACC.
  sources.push_back(matmul_kernel(c.hidden_size, c.vocab_size, ElemType::F32, ElemType::F32, false, false, kDefaultArch, 64));
  sources.push_back(matmul_kernel(c.hidden_size, c.vocab_size, ElemType::BF16, ElemType::F32, false, false, kDefaultArch, 16));
  sources.push_back(matmul_kernel(c.hidden_size, c.kv_lora_rank + c.qk_rope_head_dim, ElemType::F32, ElemType::F32, false, true,
                                  kDefaultArch, 16));
  // The fusions of the dense templates at K2.6 width: q_a + kv_a with the layer norm (NORM 1, f32
  // residual in, bf16 out), the router beside the shared GLU with the norm stored (NORM 2), q_b
  // and lm_head with theirs at 2..8 tokens, the shared down projection doing the MoE combine
  // (ROUTED 8) on the CUDA cores and the tensor cores.
  sources.push_back(matmul_siblings_kernel(c.hidden_size, *c.q_lora_rank, c.kv_lora_rank + c.qk_rope_head_dim, 0, ElemType::F32,
                                           ElemType::BF16, kDefaultArch, 1, false, 1));
  sources.push_back(matmul_siblings_kernel(c.hidden_size, c.n_routed_experts, c.moe_intermediate_size, c.moe_intermediate_size,
                                           ElemType::F32, ElemType::F32, kDefaultArch, 2, true, 2));
  sources.push_back(matmul_kernel(*c.q_lora_rank, c.num_attention_heads * (c.qk_nope_head_dim + c.qk_rope_head_dim), ElemType::BF16,
                                  ElemType::BF16, false, false, kDefaultArch, 0, 2, 0, 1));
  sources.push_back(matmul_kernel(c.hidden_size, c.vocab_size, ElemType::F32, ElemType::F32, false, false, kDefaultArch, 0, 1, 0, 1));
  sources.push_back(matmul_kernel(c.moe_intermediate_size, c.hidden_size, ElemType::BF16, ElemType::F32, false, true, kDefaultArch, 0, 1,
                                  0, 0, c.num_experts_per_tok));
  sources.push_back(matmul_kernel(c.moe_intermediate_size, c.hidden_size, ElemType::BF16, ElemType::F32, false, true, kDefaultArch, 16, 0,
                                  0, 0, c.num_experts_per_tok));
  // The rows-as-M tiles (MMA 2, steps of 4..32 tokens): lm_head at 8 tokens, the shared down
  // projection's combine at 16 (bf16 x), q_a + kv_a with the layer norm and the router beside the
  // shared GLU with the norm stored, and x loaded a round ahead (XPF 1).
  sources.push_back(matmul_rows_m_kernel(c.hidden_size, c.vocab_size, ElemType::F32, ElemType::F32, false, kDefaultArch, 8));
  sources.push_back(matmul_rows_m_kernel(c.moe_intermediate_size, c.hidden_size, ElemType::BF16, ElemType::F32, true, kDefaultArch, 16, 0,
                                         c.num_experts_per_tok));
  sources.push_back(matmul_siblings_kernel(c.hidden_size, *c.q_lora_rank, c.kv_lora_rank + c.qk_rope_head_dim, 0, ElemType::F32,
                                           ElemType::BF16, kDefaultArch, 0, false, 1, 8));
  sources.push_back(matmul_siblings_kernel(c.hidden_size, c.n_routed_experts, c.moe_intermediate_size, c.moe_intermediate_size,
                                           ElemType::F32, ElemType::F32, kDefaultArch, 0, true, 2, 16));
  sources.push_back(instantiate("matmul", {{"K", c.hidden_size}, {"N", c.hidden_size}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0},
                                           {"ROUTED", 0}, {"NORM", 0}, {"MMA", 2}, {"TOK_TILE", 16}, {"XPF", 1}}));
  // The tensor-core split-MLA partials over the bf16 cache: MMA 1 with f32 and bf16 queries.
  for (const int64_t q : {0, 1})
    sources.push_back(instantiate("mla_split_partial", {{"HEADS", c.num_attention_heads}, {"C", c.kv_lora_rank}, {"R", c.qk_rope_head_dim},
                                                        {"Q_DT", q}, {"KV_DT", 1}, {"MMA", 1}}));
  // And the all-heads MMA 2 and 3 (ldmatrix and its .trans, the cp.async ring; MMA 3's register
  // queries), bf16 queries.
  for (const int64_t mma : {2, 3})
    sources.push_back(instantiate("mla_split_partial", {{"HEADS", c.num_attention_heads}, {"C", c.kv_lora_rank}, {"R", c.qk_rope_head_dim},
                                                        {"Q_DT", 1}, {"KV_DT", 1}, {"MMA", mma}}));
  // The combine with W_UV's product (attention_uv.h), the bf16 latent of the default plans.
  sources.push_back(mla_split_combine_uv_kernel(c.num_attention_heads, c.kv_lora_rank, c.v_head_dim, ElemType::BF16, ElemType::BF16));
  // A device round at the K2.6 drafter's block (16, mask 163838) and the largest verify bucket.
  sources.push_back(round_draft_inputs_kernel(16, 163838));
  sources.push_back(round_tree_kernel(128, 127, 15, 128));
  sources.push_back(round_sample_kernel(128, c.vocab_size));
  sources.push_back(round_walk_kernel(128));
  // The load-time generator of --synthetic-weights plans, every kind it has (ir/support's
  // synthetic_values.h compiled for the device).
  sources.push_back(synthetic_weights_kernel(0, ElemType::BF16, 0));
  sources.push_back(synthetic_weights_kernel(0, ElemType::F32, 0));
  sources.push_back(synthetic_weights_kernel(1, ElemType::F32, c.quant.group_size));
  sources.push_back(synthetic_weights_kernel(2, ElemType::BF16, c.quant.group_size));
  std::set<std::string> all;
  for (const Family* f : all_families())
    if (f->library.empty()) all.insert(f->name);  // a library call (cublaslt_matmul) has nothing to compile
  EXPECT_EQ(families_of(sources), all);
  compile_and_check(sources);
}

}  // namespace
}  // namespace kplan::codegen

namespace kplan::codegen {
namespace {

// A generated entry taking a TMA tensor map by value (ArgKind::TensorMap, common.cuh's
// CUtensorMap) compiles for both archs: what a Hopper / Blackwell TMA family will declare.
TEST(CodegenCompile, TensorMapParameterCompiles) {
  KernelSource k;
  k.family = "tma_probe";
  k.id = "tma_probe";
  k.entry = "kplan_tma_probe";
  k.header = "common.cuh";
  k.signature = {{"map", ArgKind::TensorMap}, {"y", ArgKind::DevicePtr}};
  k.block_threads = 32;
  k.source =
      "#include \"common.cuh\"\n"
      "extern \"C\" __global__ void __launch_bounds__(32) kplan_tma_probe(const __grid_constant__ CUtensorMap map, void* y) {\n"
      "  if (threadIdx.x == 0) static_cast<unsigned long long*>(y)[0] = map.opaque[0];\n"
      "}\n";
  compile_and_check({k});
}

}  // namespace
}  // namespace kplan::codegen
