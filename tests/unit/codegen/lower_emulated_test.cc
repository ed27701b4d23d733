// The lowered launch program of a real (synthesised) checkpoint, run by the CPU launch emulator,
// gives the CPU reference's logits and captured hidden states: prefill, a tree verify step with
// an ancestor mask over the committed cache, a KV commit of the accepted path, AR decode, and a
// short chunk padded into a larger bucket.
// This checks the lowering's strides, offsets, argument order and slot reuse without a GPU; with
// bf16 caches (kplan compile's default) or bf16 activations (--activations bf16) it checks the
// stored dtypes end to end too, within the bf16 tolerance (the CPU reference computes in f32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "codegen_test_util.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/driver/compile.h"
#include "emulated_plan.h"
#include "tests/unit/runtime/greedy_near_tie.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/cpu_target.h"
#include "compiler/driver/reference_plan.h"

namespace kplan::codegen {
namespace {

using testing_util::EmulatedTarget;
using testing_util::relative_error;
using ::kplan::testing_util::ScopedEnv;
using testing_util::TempDir;

// `got` against the reference's `want` row by row, each within `tol`; with bf16 storage
// (`route_flips`) a row may instead route within kRouterNearTie of a tie in some layer (the
// reference's margins for this step): its rounded input chose the other expert there, so the
// layer's output jumps (tiny-int4's prefill row 1, 1.3e-3 from a tie, does with fused residual
// adds) — printed as a figure, not a lowering error. The other rows must match.
void expect_rows_close(const std::vector<float>& got, const Matrix& want, const std::vector<float>& margins, double tol,
                       bool route_flips, const std::string& label) {
  ASSERT_EQ(got.size(), static_cast<size_t>(want.rows * want.cols)) << label;
  int64_t flipped = 0;
  for (int64_t r = 0; r < want.rows; ++r) {
    const std::vector<float> row(got.begin() + r * want.cols, got.begin() + (r + 1) * want.cols);
    const double err = relative_error(row, std::vector<float>(want.row(r), want.row(r) + want.cols));
    if (err < tol) continue;
    const double margin = static_cast<size_t>(r) < margins.size() ? margins[r] : INFINITY;
    if (route_flips && margin <= kplan::testing_util::kRouterNearTie) {
      std::printf("[ figures  ] %s row %lld: %.3g from the reference, its route %.3g from a tie (a flipped expert)\n", label.c_str(),
                  static_cast<long long>(r), err, margin);
      ++flipped;
      continue;
    }
    ADD_FAILURE() << label << " row " << r << ": relative error " << err << " (tolerance " << tol << "), route " << margin
                  << " from a tie";
  }
  EXPECT_LT(flipped, want.rows) << label << ": every row flipped an expert";
}

// `preset`: `kplan synth` arguments before --seed; `activations`, `caches`: how they are stored;
// `kernel`: a piece of a kernel id the plan must hold (the instance a test means to run);
// `buckets`: the plan's token counts (the 5-token prefill and the 8-node tree take the smallest that holds them).
void check_checkpoint(const std::string& preset, DType activations = DType::F32, DType caches = DType::F32,
                      const std::string& kernel = "", const std::vector<int64_t>& buckets = {1, 5, 8}) {
  // f32 storage: the kernels' math is the reference's up to summation order. bf16 storage: each
  // stored value carries a relative rounding of up to 2^-9; issue 4's bf16 tolerance.
  const double tol = activations == DType::F32 && caches == DType::F32 ? 1e-4 : 1e-2;
  TempDir dir;
  const std::filesystem::path ckpt = dir.path() / "ckpt";
  const std::string cmd = std::string(KPLAN_BINARY) + " synth " + preset + " --seed 1 --out " + ckpt.string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  kplan::CompileOptions c;
  c.model = ckpt;
  c.build.capture_layers = std::vector<int64_t>{1};
  CompileResult compiled = compile_to_ir(c);
  LowerOptions o;
  o.buckets = buckets;
  o.max_context = 64;
  o.activations = activations;
  o.kv_cache = caches;
  const SafetensorsCheckpoint& weights = compiled.target->weights();
  plan::LoweredPlan lp = passes::lower_module(
      *compiled.module, [&](const std::string&, const std::string& name) { return weights.get(name).bytes; }, o);
  // The caches are stored as the option says: a latent row of C + R elements, 4 or 2 bytes each.
  for (const plan::KvCache& kv : lp.kv_caches)
    EXPECT_EQ(kv.row_bytes, (compiled.target->config().kv_lora_rank + compiled.target->config().qk_rope_head_dim) * dtype_size(caches))
        << kv.name;
  if (!kernel.empty())
    EXPECT_TRUE(std::any_of(lp.kernels.begin(), lp.kernels.end(), [&](const KernelSource& k) { return k.id.find(kernel) != std::string::npos; }))
        << "no kernel " << kernel;
  EmulatedTarget gpu_like(lp);

  cpu::CpuTarget cpu(std::make_shared<const plan::Plan>(reference_plan(ckpt)), ckpt.string(), 64);
  cpu.set_capture_layers({1});
  const int64_t vocab = cpu.config().vocab_size;

  // Prefill of 5 tokens.
  StepInput prefill{{5, 17, 3, static_cast<int32_t>(900 % vocab), 42}, {0, 1, 2, 3, 4}, {}};
  auto [logits, hidden] = gpu_like.forward(prefill, 0);
  StepOutput want = cpu.forward(prefill);
  const bool flips = tol > 1e-4;  // bf16 storage
  expect_rows_close(logits, want.logits, cpu.router_margins(), tol, flips, preset + " prefill");
  expect_rows_close(hidden, want.captured.at(0), cpu.router_margins(), tol, flips, preset + " prefill hidden");
  const std::vector<int32_t> all = {0, 1, 2, 3, 4};
  cpu.commit(all);

  // Tree verify of 8 nodes at positions 5 + depth: parents 0 <- 1, 2; 1 <- 3, 4; 2 <- 5; 4 <- 6; 6 <- 7.
  const StepInput tree = testing_util::tree_step({-1, 0, 0, 1, 1, 2, 4, 6}, 5, 11, 7);  // tokens < tiny's vocab
  std::tie(logits, hidden) = gpu_like.forward(tree, 5);
  want = cpu.forward(tree);
  expect_rows_close(logits, want.logits, cpu.router_margins(), tol, flips, preset + " tree verify");
  const std::vector<int32_t> path = {0, 1, 4, 6};
  cpu.commit(path);
  gpu_like.commit(5, path);

  // AR decode at position 9 over the compacted cache.
  StepInput ar{{23}, {9}, {}};
  std::tie(logits, hidden) = gpu_like.forward(ar, 9);
  want = cpu.forward(ar);
  expect_rows_close(logits, want.logits, cpu.router_margins(), tol, flips, preset + " AR after commit");
  cpu.commit(std::vector<int32_t>{0});

  // A 3-token chunk in the 5-token bucket: the padding rows change nothing for the real ones.
  StepInput chunk{{4, 8, 15}, {10, 11, 12}, {}};
  std::tie(logits, hidden) = gpu_like.forward(chunk, 10);
  want = cpu.forward(chunk);
  expect_rows_close(logits, want.logits, cpu.router_margins(), tol, flips, preset + " padded chunk");
  expect_rows_close(hidden, want.captured.at(0), cpu.router_margins(), tol, flips, preset + " padded chunk hidden");
}

TEST(CodegenLowerEmulated, TinyMatchesTheCpuReference) { check_checkpoint("tiny"); }
// bf16 KV caches (the CLI's default): kv_append rounds f32 rows into them, attention widens them.
// (Not tiny: its tree row 1 routes 1.2e-3 from a tie, and a rounded cache row flips that expert.)
TEST(CodegenLowerEmulated, Tiny2WithBf16CachesMatchesTheCpuReference) { check_checkpoint("tiny2", DType::F32, DType::BF16); }
TEST(CodegenLowerEmulated, TinyInt4WithBf16CachesMatchesTheCpuReference) { check_checkpoint("tiny --int4", DType::F32, DType::BF16); }
TEST(CodegenLowerEmulated, TinyYarnWithBf16CachesMatchesTheCpuReference) { check_checkpoint("tiny-yarn", DType::F32, DType::BF16); }
// bf16 activations and KV caches: every kernel reads and writes the stored dtype.
TEST(CodegenLowerEmulated, TinyWithBf16ActivationsMatchesTheCpuReference) { check_checkpoint("tiny", DType::BF16, DType::BF16); }
TEST(CodegenLowerEmulated, TinyInt4WithBf16ActivationsMatchesTheCpuReference) { check_checkpoint("tiny --int4", DType::BF16, DType::BF16); }
TEST(CodegenLowerEmulated, Tiny2MatchesTheCpuReference) { check_checkpoint("tiny2"); }
// YaRN rope and group-limited routing (n_group 4, topk_group 2).
TEST(CodegenLowerEmulated, TinyYarnMatchesTheCpuReference) { check_checkpoint("tiny-yarn"); }
// Routed experts as compressed-tensors INT4, dequantised in the kernels.
TEST(CodegenLowerEmulated, TinyInt4MatchesTheCpuReference) { check_checkpoint("tiny --int4"); }

// The default lowers MLA attention of steps up to 8 tokens to the split-context pair (partial +
// combine launches and their scratch); KPLAN_MLA_SPLIT=0 keeps the one-launch mla_attention at
// every step, KPLAN_MLA_SPLIT=1 the pair: both through prefill, tree verify, AR after a commit
// and a padded chunk.
TEST(CodegenLowerEmulated, TinyWithEitherMlaLoweringMatchesTheCpuReference) {
  for (const char* v : {"0", "1"}) {
    const ScopedEnv env("KPLAN_MLA_SPLIT", v);
    check_checkpoint("tiny");
    check_checkpoint("tiny", DType::BF16);
  }
}

// Heads by 16 over bf16 caches take the all-heads split-MLA partial (MMA 2) at every step up to
// 64 tokens, the combine in column chunks: prefill, tree verify, AR after a commit and a padded
// chunk through its lowering (tiny with 16 heads).
TEST(CodegenLowerEmulated, SixteenHeadsWithTheAllHeadsMlaPartialMatchTheCpuReference) {
  TempDir dir;
  const std::filesystem::path path = dir.path() / "tiny16.json";
  testing_util::write_tiny_config_with(path, {{"num_attention_heads", "16"}, {"num_key_value_heads", "16"}});
  check_checkpoint("--config " + path.string(), DType::F32, DType::BF16, "mla_split_partial_h16_c64_r16_qf32_kvbf16_w2_kt32_mma2");
}

// The attention's combine with W_UV's product (KPLAN_FUSE_ATTN_UV=1, opt-in; attention_uv.h): a
// latent of 256 columns (the fused launch's multiple) over bf16 caches: prefill, tree verify, AR
// after a commit and a padded chunk with the head_matmul in the combine's launch, f32 and bf16
// activations.
TEST(CodegenLowerEmulated, TheAttentionWithWuvInItsCombineMatchesTheCpuReference) {
  const ScopedEnv env("KPLAN_FUSE_ATTN_UV", "1");
  TempDir dir;
  const std::filesystem::path path = dir.path() / "tiny256.json";
  testing_util::write_tiny_config_with(path, {{"kv_lora_rank", "256"}});
  check_checkpoint("--config " + path.string(), DType::F32, DType::BF16, "mla_split_combine_uv_h4_c256_n32");
  check_checkpoint("--config " + path.string(), DType::BF16, DType::BF16, "mla_split_combine_uv_h4_c256_n32_lbf16_obf16");
}

// The cuBLASLt calls of long steps (compiler/codegen/families/cublaslt_matmul.h), emulated as
// that family's doc block says: tiny's weights take the tensor-core path from 4 tokens
// (KPLAN_MATMUL_MMA_MIN_TOKENS), and the library from 16 here (KPLAN_CUBLASLT_MIN_TOKENS): the
// prefill and the tree verify of the 16-token bucket run through the calls (a residual add in the
// epilogue: ACC 1; the norm before them launched on its own).
TEST(CodegenLowerEmulated, TinyWithCublasLtCallsMatchesTheCpuReference) {
  const ScopedEnv env({{"KPLAN_MATMUL_MMA_MIN_TOKENS", "4"}, {"KPLAN_CUBLASLT_MIN_TOKENS", "16"}});
  check_checkpoint("tiny", DType::BF16, DType::BF16, "cublaslt_matmul_k128_n256_xbf16_yf32_acc1", {1, 16});
  check_checkpoint("tiny --int4", DType::BF16, DType::BF16, "cublaslt_matmul", {1, 16});
}

// The norms in their matmuls' launches (KPLAN_FUSE_NORM=1, opt-in): the same results through
// prefill, tree verify and AR (f32 and bf16 activations; INT4 experts, whose norm is stored for
// the routed experts by the router's sibling launch: NORM 2).
TEST(CodegenLowerEmulated, TinyWithTheNormFusionMatchesTheCpuReference) {
  const ScopedEnv env("KPLAN_FUSE_NORM", "1");
  check_checkpoint("tiny");
  check_checkpoint("tiny", DType::BF16);
  check_checkpoint("tiny --int4");
}

// The embedding gather in the first norm's launch (embedding_norm.h, the default): the same results,
// f32 and bf16 activations, the plan holding the fused instance.
TEST(CodegenLowerEmulated, TinyWithTheGatherInTheFirstNormMatchesTheCpuReference) {
  check_checkpoint("tiny", DType::F32, DType::F32, "embedding_norm_");
  check_checkpoint("tiny", DType::BF16, DType::BF16, "embedding_norm_");
}

// The first layer's add in its post-attention norm's launch (add_norm.h): with bf16 activations
// the gathered rows are bf16 where the residual stream is f32, so o_proj's epilogue leaves the add
// to the norm's launch; the plan holds the fused instance and matches the reference as before.
TEST(CodegenLowerEmulated, TinyWithTheFirstAddInItsNormMatchesTheCpuReference) {
  check_checkpoint("tiny", DType::BF16, DType::BF16, "add_norm_");
}

// The routing in the router logits' launch (router_experts.h, the default): the plan holds the
// routing siblings instance and matches the reference, f32 and bf16, through prefill, tree
// verify, AR and a padded chunk.
TEST(CodegenLowerEmulated, TinyWithTheRoutingInTheLogitsLaunchMatchesTheCpuReference) {
  check_checkpoint("tiny", DType::F32, DType::F32, "_rk2_rn1");
  check_checkpoint("tiny", DType::BF16, DType::BF16, "_rk2_rn1");
}

// And without it (KPLAN_ROUTE_IN_LOGITS=0): the experts' gate/up launch routes at every step.
TEST(CodegenLowerEmulated, TinyWithTheRoutingInTheGateUpLaunchMatchesTheCpuReference) {
  const ScopedEnv env("KPLAN_ROUTE_IN_LOGITS", "0");
  check_checkpoint("tiny", DType::F32, DType::F32, "_route");
  check_checkpoint("tiny", DType::BF16, DType::BF16, "_route");
}

// The rope-append in its W_UK's launch (uk_rope_append.h, the default): the plan holds the fused
// instance and matches the reference, f32 and bf16; KPLAN_FUSE_UK_APPEND=0 keeps the rope-append's
// own launch, which matches as well.
TEST(CodegenLowerEmulated, TinyWithTheRopeAppendInWukMatchesTheCpuReference) {
  check_checkpoint("tiny", DType::F32, DType::F32, "uk_rope_append_");
  check_checkpoint("tiny", DType::BF16, DType::BF16, "uk_rope_append_");
  const ScopedEnv env("KPLAN_FUSE_UK_APPEND", "0");
  check_checkpoint("tiny", DType::BF16, DType::BF16, "mla_rope_append_");
}

}  // namespace
}  // namespace kplan::codegen
