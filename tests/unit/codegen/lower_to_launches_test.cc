// Lowering @target to launches: the plan it gives is self-consistent (plan::validate_plan: every
// launch argument matches its kernel's signature, slots fit the arena, step inputs are bound),
// compiles for the shipped archs, views cost no launches, scratch slots are reused, and each
// bucket returns logits (and the captured hidden states) for its token count.
#include <cstdlib>

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <map>

#include "codegen_test_util.h"
#include "compiler/codegen/launch_geometry.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/driver/compile.h"
#include "compiler/plan/plan_assemble.h"
#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

using testing_util::TempDir;
using ::kplan::testing_util::ScopedEnv;

struct Lowered {
  std::unique_ptr<ir::Module> module;
  std::vector<uint8_t> zeros;
  plan::LoweredPlan plan;
};

// The IR of a test config (structure only) and zero weights of the right sizes.
// `config`: a test config name, or a checkpoint directory path.
Lowered lower_config(const std::string& config, const LowerOptions& options) {
  Lowered l;
  kplan::CompileOptions c;
  c.model = config.find('/') != std::string::npos ? config : std::string(KPLAN_TEST_DATA_DIR) + "/configs/" + config + ".json";
  c.load_weights = false;
  c.build.capture_layers = std::vector<int64_t>{1};
  l.module = compile_to_ir(c).module;
  const ir::Function* target = l.module->function("target");
  std::map<std::string, size_t> sizes;  // by tensor name (weight_stack parts by their own names)
  for (const ir::Op* op : target->ops()) {
    if (op->kind() != ir::OpKind::Weight && op->kind() != ir::OpKind::WeightStack) continue;
    size_t bytes = dtype_size(op->result()->type().dtype);
    for (const ir::Dim& d : op->result()->type().shape) bytes *= d.value();
    const std::string& name = op->attrs().get_string("name");
    if (op->kind() == ir::OpKind::Weight) {
      sizes[name] = bytes;
    } else {
      const int64_t count = op->attrs().get_int("count");
      const size_t star = name.find('*');
      for (int64_t e = 0; e < count; ++e) sizes[name.substr(0, star) + std::to_string(e) + name.substr(star + 1)] = bytes / count;
    }
  }
  size_t largest = 0;
  for (const auto& [name, bytes] : sizes) largest = std::max(largest, bytes);
  l.zeros.assign(largest, 0);
  l.plan = lower_target(*target, [&](const std::string& name) {
    return std::span<const uint8_t>(l.zeros.data(), sizes.at(name));
  }, options);
  return l;
}

TEST(CodegenLower, TinyTargetGivesAValidPlanForEveryArch) {
  // The one-launch MLA at every step, so every bucket has the same launches (by default steps of
  // up to 8 tokens take the split pair: one launch more a layer).
  const ScopedEnv env("KPLAN_MLA_SPLIT", "0");
  LowerOptions o;
  o.buckets = {1, 8, 40};
  o.max_context = 128;
  o.max_tree_nodes = 40;
  // Tiny's weights are all under the tensor-core threshold's 4 M elements: without the override
  // no bucket takes a tensor-core instance.
  {
    Lowered small = lower_config("tiny", o);
    for (const plan::Bucket& b : small.plan.buckets)
      for (const plan::Launch& launch : b.launches) {
        const codegen::KernelSource& k = small.plan.kernels[launch.kernel];
        if (k.family == "matmul") {
          EXPECT_EQ(codegen::kernel_param(k, "MMA"), 0) << k.id << " at " << b.tokens << " tokens";
        }
      }
  }
  // Below, the tensor cores from 16 tokens for every weight (KPLAN_MATMUL_MMA_MIN_TOKENS), so the
  // per-bucket choice of instances is checked on tiny too.
  setenv("KPLAN_MATMUL_MMA_MIN_TOKENS", "16", 1);
  Lowered l = lower_config("tiny", o);
  unsetenv("KPLAN_MATMUL_MMA_MIN_TOKENS");
  const plan::LoweredPlan& lp = l.plan;
  ASSERT_EQ(lp.buckets.size(), 3u);
  EXPECT_EQ(lp.kv_caches.size(), 4u);
  EXPECT_EQ(lp.step_inputs.size(), static_cast<size_t>(plan::kStepInputKinds));
  for (const plan::Bucket& b : lp.buckets) {
    EXPECT_EQ(b.program, "target");
    // 4 layers: embedding, then per layer at least q_a + kv_a (the layer norm in their launch),
    // q_b (q_a's norm in its launch), the rope-append, 2 head matmuls, attention, o_proj (the add
    // in its epilogue), the MLP; then lm_head (the final norm in its launch).
    EXPECT_GT(b.launches.size(), 4u * 9);
    ASSERT_EQ(b.outputs.size(), 3u);  // logits, hidden.1, next_tokens (in IR output order)
    const plan::StepOutput& logits = b.outputs[0];
    const plan::StepOutput& hidden = b.outputs[1];
    const plan::StepOutput& next = b.outputs[2];
    EXPECT_EQ(next.kind, plan::OutputKind::TokenIds);
    EXPECT_EQ(next.dtype, DType::I32);
    EXPECT_EQ(next.rows, b.tokens);
    EXPECT_EQ(next.cols, 1);
    EXPECT_EQ(logits.kind, plan::OutputKind::Logits);
    EXPECT_EQ(logits.rows, b.tokens);
    EXPECT_EQ(logits.cols, 1024);
    EXPECT_EQ(hidden.kind, plan::OutputKind::Hidden);
    EXPECT_EQ(hidden.layer, 1);
    EXPECT_EQ(hidden.cols, 256);
    EXPECT_NE(hidden.slot, logits.slot);
    // Buckets differ only in token counts: the same kernels in the same order, but for the [N, K]
    // matmuls, which take their tensor-core instance from 16 tokens on (tiles of 16 below 64), and
    // the sibling matmuls' token tiles.
    // A sibling launch of the 1-token bucket is its 2 or 3 matmuls' own launches where one takes
    // the tensor cores (GLU 1: then their swiglu's), after the norm it computed (NORM > 0); a
    // matmul that computed a norm launches that norm first there.
    size_t i = 0;
    for (const plan::Launch& l1 : lp.buckets[0].launches) {
      ASSERT_LT(i, b.launches.size());
      const codegen::KernelSource& k1 = lp.kernels[l1.kernel];
      if ((k1.family == "matmul" || k1.family == "matmul_siblings") && codegen::kernel_param(k1, "NORM") > 0 && b.tokens >= 16) {
        EXPECT_EQ(lp.kernels[b.launches[i].kernel].family, "rms_norm") << k1.id << ": its norm at " << b.tokens << " tokens";
        ++i;
        ASSERT_LT(i, b.launches.size());
      }
      const codegen::KernelSource& k = lp.kernels[b.launches[i].kernel];
      if (k1.family == "matmul_siblings" && k.family == "matmul") {
        EXPECT_GE(b.tokens, 16) << k1.id << " split at " << b.tokens << " tokens";
        const bool glu = codegen::kernel_param(k1, "GLU") == 1;
        const size_t members = glu ? (codegen::kernel_param(k1, "N") > 0 ? 3 : 2) : (codegen::kernel_param(k1, "N3") > 0 ? 3 : 2);
        for (size_t m = 0; m < members; ++m) {
          EXPECT_EQ(lp.kernels[b.launches[i + m].kernel].family, "matmul") << k1.id;
        }
        if (glu) {
          EXPECT_EQ(lp.kernels[b.launches[i + members].kernel].family, "swiglu") << k1.id << ": the pair's swiglu after them";
        }
        i += members + (glu ? 1 : 0);
        continue;
      }
      EXPECT_EQ(k.family, k1.family);
      if (k.family == "matmul" && codegen::kernel_param(k, "W_LAYOUT") == 0) {
        EXPECT_EQ(codegen::kernel_param(k, "MMA"), b.tokens >= 16 ? 1 : 0) << k.id << " at " << b.tokens << " tokens";
        if (b.tokens >= 16) {
          EXPECT_EQ(codegen::kernel_param(k, "TOK_TILE"), 16) << k.id;
        }
        EXPECT_EQ(codegen::kernel_param(k, "K"), codegen::kernel_param(k1, "K"));
        EXPECT_EQ(codegen::kernel_param(k, "NORM"), b.tokens >= 16 ? 0 : codegen::kernel_param(k1, "NORM")) << k.id;
      } else if (k.family == "matmul_siblings") {  // on the CUDA cores: token tiles of 1, 2, 8
        EXPECT_EQ(codegen::kernel_param(k, "TOK_TILE"), b.tokens == 1 ? 1 : b.tokens <= 8 ? 2 : 8) << k.id;
        EXPECT_EQ(codegen::kernel_param(k, "N2"), codegen::kernel_param(k1, "N2"));
        EXPECT_EQ(codegen::kernel_param(k, "NORM"), codegen::kernel_param(k1, "NORM")) << k.id;
      } else {
        EXPECT_EQ(b.launches[i].kernel, l1.kernel) << k.id;
      }
      ++i;
    }
    EXPECT_EQ(i, b.launches.size());
  }
  // Views (slice / reshape / transpose) and weights emit no launches.
  for (const plan::Launch& launch : lp.buckets[0].launches) {
    EXPECT_EQ(launch.note.find("slice"), std::string::npos);
    EXPECT_EQ(launch.note.find("reshape"), std::string::npos);
  }
  // Scratch reuse: far fewer slots than values.
  int scratch = 0;
  for (const plan::BufferSlot& s : lp.buffers.slots) scratch += s.role == plan::SlotRole::Scratch;
  EXPECT_LT(scratch, 20);

  TempDir cache;
  plan::PlanSources sources;
  sources.model_dir = std::string(KPLAN_TEST_DATA_DIR) + "/configs/tiny.json";
  sources.model = load_model_config(sources.model_dir);
  plan::AssembleOptions a;
  a.archs = {"sm_90", "sm_120"};
  a.kernels.cache_dir = cache.path();
  a.kernels.progress = [](const std::string&) {};
  const plan::Plan p = plan::assemble_plan(sources, std::move(l.plan), a);
  EXPECT_NO_THROW(plan::validate_plan(p, "lowered tiny"));
  EXPECT_EQ(p.header.archs, a.archs);
}

TEST(CodegenLower, Tiny2OddWidthsLower) {
  LowerOptions o;
  o.buckets = {1, 5};
  o.max_context = 64;
  Lowered l = lower_config("tiny2", o);
  ASSERT_EQ(l.plan.buckets.size(), 2u);
  EXPECT_EQ(l.plan.kv_caches.size(), 6u);
  EXPECT_EQ(l.plan.kv_caches[0].row_bytes, (48u + 8u) * 4u);
}

// A KV cache's slot holds the largest step's tokens of slack rows past its max_context rows: a
// verify step's padded tokens near the end of the context read rows up to there (plan_memory.cc).
TEST(CodegenLower, KvCacheSlotsHoldTheLargestStepsRowsOfSlack) {
  LowerOptions o;
  o.buckets = {1, 5};
  o.max_context = 64;
  Lowered l = lower_config("tiny2", o);
  ASSERT_FALSE(l.plan.kv_caches.empty());
  for (const plan::KvCache& kv : l.plan.kv_caches) {
    EXPECT_EQ(kv.rows, 64u) << kv.name;
    EXPECT_EQ(l.plan.buffers.slots.at(kv.slot).size, (64u + 5u) * kv.row_bytes) << kv.name;
  }
}

// `kplan synth tiny --int4` into dir/ckpt (its path), and lowering options for a 32-position plan
// of one bucket of `tokens`.
std::string synth_tiny_int4(const TempDir& dir, int64_t tokens, LowerOptions& o) {
  const std::string ckpt = (dir.path() / "ckpt").string();
  const std::string cmd = std::string(KPLAN_BINARY) + " synth tiny --int4 --out " + ckpt + " > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  o.buckets = {tokens};
  o.max_context = 32;
  return ckpt;
}

TEST(CodegenLower, Int4ExpertsUseTheInt4Kernels) {
  TempDir dir;
  LowerOptions o;
  Lowered l = lower_config(synth_tiny_int4(dir, 3, o), o);
  // With the checkpoint's own bytes: weights view the mapped file, stacks are copies.
  const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open(dir.path() / "ckpt");
  const plan::LoweredPlan real = lower_target(*l.module->function("target"), ckpt, o);
  ASSERT_EQ(real.weights.size(), l.plan.weights.size());
  for (const plan::Weight& w : real.weights) {
    if (w.name.find('*') == std::string::npos) {  // not an expert stack
      EXPECT_EQ(w.data().data(), ckpt.get(w.name).bytes.data()) << w.name;
    }
  }
  int int4_launches = 0;
  for (const plan::Launch& launch : l.plan.buckets[0].launches) {
    const KernelSource& k = l.plan.kernels[launch.kernel];
    if (k.family == "moe_grouped_gate_up" || k.family == "moe_grouped_down")
      int4_launches += kernel_param(k, "W_FMT") == 1 && kernel_param(k, "W_LAYOUT") == 1;
  }
  EXPECT_EQ(int4_launches, 2 * 3);  // grouped gate_up + down in each of the 3 MoE layers
  // tiny's experts (H 256, I 128) are whole octets and sub-blocks: the GPU keeps them in
  // int4_frag order (the plan's bytes stay the stacked checkpoint rows, as above); the others
  // are stacked as the checkpoint's.
  int frag_words = 0, frag_scales = 0;
  for (const plan::Weight& w : l.plan.weights) {
    frag_words += w.layout == "int4_frag" && w.dtype == DType::I32;
    frag_scales += w.layout == "int4_frag_scales" && w.dtype == DType::BF16;
    if (w.name.find('*') != std::string::npos) EXPECT_TRUE(w.layout == "int4_frag" || w.layout == "int4_frag_scales") << w.name;
  }
  EXPECT_EQ(frag_words, 3 * 3);
  EXPECT_EQ(frag_scales, 3 * 3);
}

// KPLAN_MOE_FRAG=0 keeps the checkpoint's stacked layout and the kernels' W_LAYOUT 0.
TEST(CodegenLower, Int4ExpertsWithoutTheFragLayout) {
  TempDir dir;
  LowerOptions o;
  const std::string ckpt = synth_tiny_int4(dir, 1, o);
  setenv("KPLAN_MOE_FRAG", "0", 1);
  Lowered l = lower_config(ckpt, o);
  unsetenv("KPLAN_MOE_FRAG");
  for (const plan::Weight& w : l.plan.weights)
    if (w.name.find('*') != std::string::npos) EXPECT_EQ(w.layout, "stacked") << w.name;
  for (const plan::Launch& launch : l.plan.buckets[0].launches) {
    const KernelSource& k = l.plan.kernels[launch.kernel];
    if (k.family == "moe_grouped_gate_up" || k.family == "moe_grouped_down") EXPECT_EQ(kernel_param(k, "W_LAYOUT"), 0) << k.id;
  }
}

// A bf16-activations program's INT4 tensor-core experts stage their activations as bf16 (XB 1,
// with the arch's pairs a chunk and load ring for it: NT 8 / 16, PF 2 on sm_90); an f32 program's
// keep the exact hi + lo split, and so does a bf16 one under KPLAN_MOE_XBF16=0.
TEST(CodegenLower, Bf16ActivationsStageTheInt4ExpertsAsBf16) {
  TempDir dir;
  LowerOptions o;
  const std::string ckpt = synth_tiny_int4(dir, 1, o);
  auto experts = [&](const Lowered& l) {
    std::vector<const KernelSource*> ks;
    for (const plan::Launch& launch : l.plan.buckets[0].launches) {
      const KernelSource& k = l.plan.kernels[launch.kernel];
      if (k.family == "moe_grouped_gate_up" || k.family == "moe_grouped_down") ks.push_back(&k);
    }
    return ks;
  };
  const Lowered f32 = lower_config(ckpt, o);
  ASSERT_FALSE(experts(f32).empty());
  for (const KernelSource* k : experts(f32)) EXPECT_EQ(kernel_param(*k, "XB"), 0) << k->id;
  o.activations = DType::BF16;
  const Lowered bf16 = lower_config(ckpt, o);
  ASSERT_FALSE(experts(bf16).empty());
  for (const KernelSource* k : experts(bf16)) {
    ASSERT_GE(kernel_param(*k, "MMA"), 1) << k->id;  // the tensor-core path (else XB would not apply)
    EXPECT_EQ(kernel_param(*k, "XB"), 1) << k->id;
    EXPECT_EQ(kernel_param(*k, "PF"), 2) << k->id;
    EXPECT_EQ(kernel_param(*k, "NT"), k->family == "moe_grouped_down" ? 16 : 8) << k->id;
  }
  setenv("KPLAN_MOE_XBF16", "0", 1);
  const Lowered split = lower_config(ckpt, o);
  unsetenv("KPLAN_MOE_XBF16");
  for (const KernelSource* k : experts(split)) EXPECT_EQ(kernel_param(*k, "XB"), 0) << k->id;
  // sm_120 takes XB with its own pairs a chunk and PF 1 (Hopper's PF 2 is not measured there).
  o.arch = "sm_120";
  const Lowered blackwell = lower_config(ckpt, o);
  ASSERT_FALSE(experts(blackwell).empty());
  for (const KernelSource* k : experts(blackwell)) {
    EXPECT_EQ(kernel_param(*k, "XB"), 1) << k->id;
    EXPECT_EQ(kernel_param(*k, "PF"), 1) << k->id;
  }
}

// `kplan compile --dump-ir-after=emit-plan` of tiny with `fields` of its config.json replaced
// (e.g. 16 heads, which the tensor-core MLA partials need), in a process of its own (KPLAN_TUNE and
// the compile switches in `env` are read once a process): the dump's text.
std::string lowered_tiny(const TempDir& dir, const std::map<std::string, std::string>& fields, const std::string& env,
                         const std::string& flags) {
  testing_util::write_tiny_config_with(dir.path() / "config.json", fields);
  const std::filesystem::path dump = dir.path() / "lowered.txt";
  const std::string cmd = env + " " + std::string(KPLAN_BINARY) + " compile --model " + dir.path().string() + " --no-weights " + flags +
                          " --dump-ir-after=emit-plan > " + dump.string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << " (" << dump.string() << ")";
  std::ifstream lowered(dump);
  return std::string((std::istreambuf_iterator<char>(lowered)), std::istreambuf_iterator<char>());
}

// The first launch in bucket `tokens` of an emit-plan dump whose kernel id starts with `prefix`
// ("" when there is none).
std::string bucket_kernel(const std::string& dump, int tokens, const std::string& prefix) {
  const size_t begin = dump.find("bucket @target tokens = " + std::to_string(tokens) + " {");
  if (begin == std::string::npos) return "";
  const size_t end = dump.find("\n}", begin), at = dump.find(": " + prefix, begin);
  if (at == std::string::npos || at > end) return "";
  return dump.substr(at + 2, dump.find(' ', at + 2) - at - 2);
}

// The dense matmuls take their path by step size (op_rules.cc dense_matmul_path): the CUDA cores
// at 1 and 2 tokens, rows-as-M tensor-core tiles (MMA 2) from the tensor-core threshold to 32
// tokens (tiles of 8, then of 16 side by side), tokens-as-M ones (MMA 1) past it; a sibling group
// stays one launch on the rows-as-M tiles. tiny's weights are under the 4 M elements that take the
// tensor cores, so KPLAN_MATMUL_MMA_MIN_TOKENS=4 sets K2.6's threshold; KPLAN_MATMUL_ROWS_M_MAX=0
// restores the lowering before rows-as-M (CUDA cores to 15 tokens).
TEST(CodegenLower, DenseMatmulsTakeTheirPathByStepSize) {
  TempDir dir;
  const std::string flags = "--buckets 1,2,4,16,32,64 --max-context 256 --activations f32";
  const std::string out = lowered_tiny(dir, {}, "KPLAN_MATMUL_MMA_MIN_TOKENS=4", flags);
  const std::string o_proj = "matmul_k128_n256_xf32_yf32_wl0_acc1_rt0", qa_kva = "matmul_siblings_k256_na128_nb80_nc0";
  EXPECT_NE(bucket_kernel(out, 1, o_proj).find("_tt1_"), std::string::npos) << bucket_kernel(out, 1, o_proj);
  EXPECT_NE(bucket_kernel(out, 2, o_proj).find("_tt2_"), std::string::npos) << bucket_kernel(out, 2, o_proj);
  EXPECT_NE(bucket_kernel(out, 2, o_proj).find("_mma0_"), std::string::npos) << bucket_kernel(out, 2, o_proj);
  for (const auto& [tokens, tile] : std::vector<std::pair<int, std::string>>{{4, "_tt8_"}, {16, "_tt16_"}, {32, "_tt16_"}}) {
    const std::string k = bucket_kernel(out, tokens, o_proj);
    EXPECT_NE(k.find("_mma2_"), std::string::npos) << tokens << " tokens: " << k;
    EXPECT_NE(k.find(tile), std::string::npos) << tokens << " tokens: " << k;
    EXPECT_NE(bucket_kernel(out, tokens, qa_kva).find("_mma2_"), std::string::npos) << tokens << " tokens: one sibling launch";
  }
  EXPECT_NE(bucket_kernel(out, 64, o_proj).find("_mma1_"), std::string::npos) << bucket_kernel(out, 64, o_proj);
  EXPECT_EQ(bucket_kernel(out, 64, qa_kva), "") << "past the rows-as-M steps the members launch one by one";
  const std::string before = lowered_tiny(dir, {}, "KPLAN_MATMUL_MMA_MIN_TOKENS=4 KPLAN_MATMUL_ROWS_M_MAX=0", flags);
  EXPECT_NE(bucket_kernel(before, 4, o_proj).find("_tt2_"), std::string::npos) << bucket_kernel(before, 4, o_proj);
  EXPECT_NE(bucket_kernel(before, 16, o_proj).find("_mma1_"), std::string::npos) << bucket_kernel(before, 16, o_proj);
  EXPECT_NE(bucket_kernel(before, 4, qa_kva).find("_mma0_"), std::string::npos) << bucket_kernel(before, 4, qa_kva);
  // bf16 activations (compile's default): from heuristics' matmul_library_min_tokens (4, where the
  // tensor cores begin) the steps are cuBLASLt calls, a sibling group's members one by one (but the
  // shared expert's, whose input the router keeps f32); under it the CUDA cores; with the library
  // from 16 tokens the rows-as-M tiles keep the steps under it.
  const std::string bf16 = lowered_tiny(dir, {}, "KPLAN_MATMUL_MMA_MIN_TOKENS=4", "--buckets 1,2,4,16,64 --max-context 256");
  EXPECT_NE(bucket_kernel(bf16, 2, "matmul_k128_n256_xbf16_yf32_wl0_acc1").find("_mma0_"), std::string::npos) << bf16.substr(0, 300);
  for (const int tokens : {4, 16, 64}) {
    EXPECT_NE(bucket_kernel(bf16, tokens, "cublaslt_matmul_k128_n256_xbf16_yf32_acc1"), "") << tokens << " tokens: o_proj";
    EXPECT_NE(bucket_kernel(bf16, tokens, "cublaslt_matmul_k256_n128_xbf16_ybf16_acc0"), "") << tokens << " tokens: q_a";
    EXPECT_EQ(bucket_kernel(bf16, tokens, "matmul_siblings_k256_na128_nb80"), "") << tokens << " tokens: q_a and kv_a one by one";
  }
  EXPECT_EQ(bucket_kernel(bf16, 2, "cublaslt_matmul"), "");
  const std::string from16 = lowered_tiny(dir, {}, "KPLAN_MATMUL_MMA_MIN_TOKENS=4 KPLAN_CUBLASLT_MIN_TOKENS=16", "--buckets 1,4,16 --max-context 256");
  EXPECT_NE(bucket_kernel(from16, 4, "matmul_k128_n256_xbf16_yf32_wl0_acc1").find("_mma2_"), std::string::npos);
  EXPECT_NE(bucket_kernel(from16, 16, "cublaslt_matmul_k128_n256_xbf16_yf32_acc1"), "");
  const std::string off = lowered_tiny(dir, {}, "KPLAN_MATMUL_MMA_MIN_TOKENS=4 KPLAN_CUBLASLT_MIN_TOKENS=0", "--buckets 1,16 --max-context 256");
  EXPECT_EQ(off.find("cublaslt_matmul"), std::string::npos) << "KPLAN_CUBLASLT_MIN_TOKENS=0: no library call";
}

// The tensor-core split-MLA partial (KPLAN_TUNE=mla_split_partial:MMA=1) reads a bf16 cache: plan
// memory sizes its workspace from the instance for the cache's stored dtype (the kv_append's
// in-place result is the cache), so a plan with bf16 caches lowers with it.
TEST(CodegenLower, TheTensorCoreMlaPartialLowersOverABf16Cache) {
  TempDir dir;  // tiny with 16 heads (the partial's m-tile of heads)
  const std::string out = lowered_tiny(dir, {{"num_attention_heads", "16"}, {"num_key_value_heads", "16"}}, "KPLAN_TUNE=mla_split_partial:MMA=1",
                                       "--buckets 1,4 --max-context 256 --kv-cache bf16 --activations f32");
  EXPECT_NE(out.find("mla_split_partial_h16_c64_r16_qf32_kvbf16_w4_kt32_mma1"), std::string::npos)
      << "the 1-token bucket takes the split pair with the tensor-core partial";
}

// The all-heads partial (MMA 2, the default over a bf16 cache where it fits; KPLAN_MLA_WIDE=1 says
// so explicitly) over a bf16 cache: one block an SM, so a
// 1-token step over 32768 keys takes 132 splits (the CUDA-core partial's 8 groups of 8 heads take
// 33), and plan memory sizes the scratch from that instance: 132 partials of 64 heads x (128 + 2)
// f32. (tiny with K2.6's 64 heads and a latent of 128.)
TEST(CodegenLower, TheAllHeadsMlaPartialSizesItsScratch) {
  TempDir dir;
  const std::string out =
      lowered_tiny(dir, {{"num_attention_heads", "64"}, {"num_key_value_heads", "64"}, {"kv_lora_rank", "128"}}, "KPLAN_MLA_WIDE=1",
                   "--buckets 1,4 --max-context 32768 --kv-cache bf16 --activations f32");
  const size_t op = out.find("mla_split_partial_h64_c128_r16_qf32_kvbf16_w8_kt32_mma2");
  ASSERT_NE(op, std::string::npos) << "the all-heads partial";
  const size_t at = out.find("scratch = slot ", op);
  ASSERT_NE(at, std::string::npos);
  const std::string slot = out.substr(at + 15, out.find(' ', at + 15) - at - 15);
  const size_t line = out.find("slot " + slot + ": ");
  ASSERT_NE(line, std::string::npos) << slot;
  const std::string row = out.substr(line, out.find('\n', line) - line);  // "slot N: scratch.N scratch BYTES bytes"
  const std::string bytes = row.substr(0, row.rfind(" bytes"));
  EXPECT_EQ(std::stoll(bytes.substr(bytes.rfind(' ') + 1)), int64_t{132} * 64 * 130 * 4) << row;
}

TEST(CodegenLower, BadOptionsAreRefused) {
  LowerOptions o;
  o.buckets = {};
  o.max_context = 16;
  EXPECT_THROW(lower_config("tiny", o), Error);
  o.buckets = {32};
  o.max_context = 16;
  EXPECT_THROW(lower_config("tiny", o), Error);
}

}  // namespace
}  // namespace kplan::codegen
