// Instantiation: readable ids, generated sources, parameter checks, launch geometry, arch names.
#include <cstdlib>

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "codegen_test_util.h"
#include "compiler/codegen/instantiate.h"
#include "compiler/codegen/families/all.h"
#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/codegen/launch_geometry.h"
#include "compiler/codegen/model_kernels.h"
#include "compiler/codegen/nvrtc_compile.h"
#include "compiler/codegen/template_library.h"
#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

using testing_util::test_config;
using testing_util::test_draft_config;

TEST(CodegenInstantiate, ReadableIdSpellsEveryParameter) {
  const KernelSource k = mla_attention_kernel(64, 512, 64, ElemType::BF16, ElemType::BF16, ElemType::F32);
  EXPECT_EQ(k.id, "mla_attention_h64_c512_r64_qbf16_kvbf16_of32_w4");
  EXPECT_EQ(k.entry, "kplan_" + k.id);
  EXPECT_EQ(k.family, "mla_attention");
  EXPECT_EQ(k.header, "mla_attention.cuh");
  EXPECT_EQ(k.block_threads, 128);
  ASSERT_EQ(k.params.size(), 7u);
  EXPECT_EQ(k.params[0].name, "HEADS");
  EXPECT_EQ(k.params[0].value, 64);
  EXPECT_EQ(k.params[6].name, "WARPS");
}

TEST(CodegenInstantiate, GeneratedSourceIsOneWrapperAroundOneInstance) {
  const KernelSource k = rms_norm_kernel(256, ElemType::F32, ElemType::BF16);
  EXPECT_NE(k.source.find("#include \"rms_norm.cuh\""), std::string::npos);
  EXPECT_NE(k.source.find("extern \"C\" __global__ void __launch_bounds__(128) " + k.entry +
                          "(void* x, void* weight, void* y, int n_rows, int x_stride, int y_stride, float eps)"),
            std::string::npos)
      << k.source;
  EXPECT_NE(k.source.find("kp::rms_norm<256, 0, 1, 128>(x, weight, y, n_rows, x_stride, y_stride, eps);"),
            std::string::npos)
      << k.source;
  // A handful of lines: the template does the work.
  EXPECT_LT(std::count(k.source.begin(), k.source.end(), '\n'), 8);
  ASSERT_EQ(k.signature.size(), 7u);
  EXPECT_EQ(k.signature[0].kind, ArgKind::DevicePtr);
  EXPECT_EQ(k.signature[3].kind, ArgKind::I32);
  EXPECT_EQ(k.signature[6].kind, ArgKind::F32);
}

TEST(CodegenInstantiate, TuningParametersCanBeGiven) {
  const KernelSource a = instantiate("matmul", {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}});
  const KernelSource b = instantiate("matmul", {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0},
                                                {"WARPS", 8}, {"TOK_TILE", 2}, {"RPW", 2}, {"KSPLIT", 4}, {"UNROLL", 3}});
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(b.id, "matmul_k64_n32_xf32_yf32_wl0_acc0_rt0_norm0_w8_tt2_r2_ks4_u3_mma0_pf0_xp0");
  EXPECT_EQ(b.block_threads, 256);
}

// A family with a prologue (the matmul's weight prefetch) runs it before the grid waits on its
// predecessor, then the instance; KPLAN_WEIGHT_PREFETCH sets its KiB (0, none, by default), a bad
// value is a clear error naming the variable.
TEST(CodegenInstantiate, MatmulPrefetchesItsWeightsBeforeTheGridWaits) {
  EXPECT_EQ(kernel_param(matmul_kernel(64, 32, ElemType::F32, ElemType::F32, false, false, "sm_90"), "PREFETCH"), 0);
  setenv("KPLAN_WEIGHT_PREFETCH", "4096", 1);
  const KernelSource k = matmul_kernel(64, 32, ElemType::F32, ElemType::F32, false, false, "sm_90");
  const size_t prologue = k.source.find("kp::matmul_prefetch<"), wait = k.source.find("kp::grid_dependency_begin();"),
               body = k.source.find("kp::matmul<");
  ASSERT_NE(prologue, std::string::npos) << k.source;
  EXPECT_LT(prologue, wait) << k.source;
  EXPECT_LT(wait, body) << k.source;
  EXPECT_EQ(kernel_param(k, "PREFETCH"), 4096);
  const KernelSource rms = instantiate("rms_norm", {{"D", 256}, {"X_DT", 0}, {"Y_DT", 1}});
  EXPECT_EQ(rms.source.find("prefetch"), std::string::npos) << "a family without a prologue";
  setenv("KPLAN_WEIGHT_PREFETCH", "0", 1);
  EXPECT_EQ(kernel_param(matmul_kernel(64, 32, ElemType::F32, ElemType::F32, false, false, "sm_90"), "PREFETCH"), 0);
  setenv("KPLAN_WEIGHT_PREFETCH", "lots", 1);
  try {
    matmul_kernel(64, 32, ElemType::F32, ElemType::F32, false, false, "sm_90");
    ADD_FAILURE() << "KPLAN_WEIGHT_PREFETCH=lots was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KPLAN_WEIGHT_PREFETCH"), std::string::npos) << e.what();
  }
  unsetenv("KPLAN_WEIGHT_PREFETCH");
}

// The dense matmul's tiling is a function of N and K (kernels_templates/matmul.cuh): the widest
// projections take 4 rows per warp, narrow ones split K across the warps of a block so that the
// grid still fills the GPU, [K, N] weights keep one thread per column.
TEST(CodegenInstantiate, MatmulTilingFollowsTheShape) {
  auto tiling = [](int64_t k, int64_t n, std::string_view arch, bool kn = false) {
    const KernelSource s = matmul_kernel(k, n, ElemType::F32, ElemType::F32, kn, false, arch);
    return std::vector<int64_t>{kernel_param(s, "WARPS"), kernel_param(s, "RPW"), kernel_param(s, "KSPLIT"), kernel_param(s, "UNROLL")};
  };
  EXPECT_EQ(tiling(7168, 163840, "sm_90"), (std::vector<int64_t>{4, 4, 1, 4}));  // lm_head
  EXPECT_EQ(tiling(7168, 576, "sm_90"), (std::vector<int64_t>{4, 1, 4, 8}));     // kv_a: split-K
  EXPECT_EQ(tiling(1536, 12288, "sm_90"), (std::vector<int64_t>{4, 4, 1, 4}));  // q_b
  EXPECT_EQ(tiling(8192, 7168, "sm_90"), (std::vector<int64_t>{4, 4, 1, 4}));    // o_proj: 4 rows, 1792 warps
  EXPECT_EQ(tiling(7168, 4224, "sm_90"), (std::vector<int64_t>{4, 2, 1, 8}));    // N = the grid's warps: 2 rows
  EXPECT_EQ(tiling(7168, 2112, "sm_90"), (std::vector<int64_t>{4, 1, 2, 8}));    // q_a + kv_a
  EXPECT_EQ(tiling(7168, 2112, "sm_120"), (std::vector<int64_t>{4, 1, 4, 8}));   // 188 SMs: more split
  EXPECT_EQ(tiling(64, 32, "sm_90"), (std::vector<int64_t>{4, 1, 1, 8}));        // too short to split
  // W_UK, [K, N]: K over 8 warps, 8 columns a lane, a warp's 16 k rows all in flight
  EXPECT_EQ(tiling(128, 512, "sm_90", true), (std::vector<int64_t>{8, 1, 8, 16}));
  EXPECT_EQ(tiling(16, 32, "sm_90", true), (std::vector<int64_t>{4, 1, 1, 16}));  // too short to split
  EXPECT_EQ(tiling(512, 512, "sm_90", true), (std::vector<int64_t>{8, 1, 8, 16}));  // 64 k rows a warp: 16 at a time
  // The tokens-as-M instances (MMA 1, the longer steps): 16 rows a warp, K split for narrow N.
  auto mma = [](int64_t k, int64_t n, int64_t tokens, std::string_view arch) {
    const KernelSource s = matmul_kernel(k, n, ElemType::F32, ElemType::F32, false, false, arch, tokens);
    return std::vector<int64_t>{kernel_param(s, "MMA"), kernel_param(s, "TOK_TILE"), kernel_param(s, "WARPS"), kernel_param(s, "RPW"),
                                kernel_param(s, "KSPLIT"), kernel_param(s, "UNROLL")};
  };
  EXPECT_EQ(mma(7168, 163840, 64, "sm_90"), (std::vector<int64_t>{1, 64, 4, 32, 1, 2}));  // lm_head-wide: 32 rows
  EXPECT_EQ(mma(7168, 18432, 16, "sm_90"), (std::vector<int64_t>{1, 16, 4, 16, 4, 2}));
  // The wide instance of 64+ token steps (tiles of 16, 32 rows a warp, no K split) where measured.
  const KernelSource wide = matmul_kernel(8192, 7168, ElemType::F32, ElemType::F32, false, false, "sm_90", 16, 0, 32);
  EXPECT_EQ((std::vector<int64_t>{kernel_param(wide, "TOK_TILE"), kernel_param(wide, "RPW"), kernel_param(wide, "KSPLIT"),
                                  kernel_param(wide, "WARPS")}),
            (std::vector<int64_t>{16, 32, 1, 4}));
  EXPECT_TRUE(matmul_wide_long_steps("sm_90", 7168));
  EXPECT_FALSE(matmul_wide_long_steps("sm_90", 2048));
  EXPECT_FALSE(matmul_wide_long_steps("sm_120", 7168));
  // The 1-token and 2..8-token CUDA-core instances: token tiles of 1 / 2, 4 rows a warp, K split
  // over 4 / 2 warps where each slice keeps a load a lane.
  auto few = [](int64_t k, int64_t n, int64_t tokens) {
    const KernelSource s = matmul_kernel(k, n, ElemType::F32, ElemType::F32, false, false, "sm_90", 0, tokens);
    return std::vector<int64_t>{kernel_param(s, "TOK_TILE"), kernel_param(s, "RPW"), kernel_param(s, "KSPLIT"), kernel_param(s, "WARPS")};
  };
  EXPECT_EQ(few(8192, 7168, 1), (std::vector<int64_t>{1, 4, 4, 4}));
  EXPECT_EQ(few(8192, 7168, 2), (std::vector<int64_t>{2, 4, 2, 4}));
  EXPECT_EQ(few(512, 256, 1), (std::vector<int64_t>{1, 4, 2, 4}));  // 64 chunks: 2 slices of 32
  EXPECT_EQ(few(192, 256, 1), (std::vector<int64_t>{1, 4, 1, 4}));  // too short to split
  EXPECT_EQ(mma(7168, 576, 16, "sm_90"), (std::vector<int64_t>{1, 16, 8, 16, 8, 2}));
  EXPECT_EQ(mma(7168, 576, 16, "sm_120"), (std::vector<int64_t>{1, 16, 8, 16, 8, 4}));
  // Tensor cores from 4 tokens for a K2.6-sized weight (rows as mma's M up to 32 tokens); never
  // for a small one (the bundled pair's).
  EXPECT_EQ(matmul_mma_min_tokens("sm_90", 163840, 7168), 4);
  EXPECT_EQ(matmul_mma_min_tokens("sm_90", 1536, 7168), 4);
  EXPECT_EQ(matmul_rows_m_max_tokens("sm_90"), 32);
  // Rows as M: K split 8 ways where K holds 2 rounds a slice (q_b's 1536: 4), 16 ways for a row
  // space of at most a 16-row group an SM; 32 rows a warp at 16-token tiles from N 4096, at
  // 8-token tiles for lm_head or short K; 16 (8 rounds) elsewhere.
  auto rows_m = [](int64_t k, int64_t n, int64_t tokens) {
    const KernelSource s = matmul_rows_m_kernel(k, n, ElemType::F32, ElemType::F32, false, "sm_90", tokens);
    return std::vector<int64_t>{kernel_param(s, "MMA"), kernel_param(s, "RPW"), kernel_param(s, "UNROLL"), kernel_param(s, "KSPLIT"),
                                kernel_param(s, "WARPS")};
  };
  EXPECT_EQ(rows_m(7168, 163840, 8), (std::vector<int64_t>{2, 32, 4, 8, 8}));
  EXPECT_EQ(rows_m(8192, 7168, 8), (std::vector<int64_t>{2, 16, 8, 8, 8}));
  EXPECT_EQ(rows_m(8192, 7168, 16), (std::vector<int64_t>{2, 32, 4, 8, 8}));
  EXPECT_EQ(rows_m(1536, 12288, 8), (std::vector<int64_t>{2, 32, 4, 4, 4}));
  EXPECT_EQ(rows_m(7168, 1536, 16), (std::vector<int64_t>{2, 16, 4, 16, 16}));  // at most a 16-row group an SM: K split 16 ways
  EXPECT_EQ(rows_m(7168, 4480, 8), (std::vector<int64_t>{2, 16, 8, 8, 8}));
  EXPECT_EQ(matmul_mma_min_tokens("sm_90", 576, 7168), 0);  // kv_a: just under 4 M weights (a tie measured)
  EXPECT_EQ(matmul_mma_min_tokens("sm_90", 4352, 192), 0);
  setenv("KPLAN_MATMUL_MMA_MIN_TOKENS", "0", 1);
  EXPECT_EQ(matmul_mma_min_tokens("sm_90", 163840, 7168), 0);
  setenv("KPLAN_MATMUL_MMA_MIN_TOKENS", "sixteen", 1);
  EXPECT_THROW(matmul_mma_min_tokens("sm_90", 163840, 7168), Error);
  unsetenv("KPLAN_MATMUL_MMA_MIN_TOKENS");
  auto message = [](const ParamValues& p) {
    try {
      instantiate("matmul", p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ParamValues p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}, {"WARPS", 4}, {"KSPLIT", 3}};
  EXPECT_NE(message(p).find("KSPLIT (3) must divide WARPS (4)"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 1}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}, {"RPW", 2}, {"TOK_TILE", 8}};
  EXPECT_NE(message(p).find("W_LAYOUT 1: RPW * 8 * TOK_TILE accumulators above 64 would spill"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 1}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}, {"WARPS", 16}, {"KSPLIT", 8}, {"RPW", 2}, {"TOK_TILE", 2}};
  EXPECT_NE(message(p).find("exceed 48 KiB"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}, {"RPW", 16}, {"TOK_TILE", 8}};
  EXPECT_NE(message(p).find("would spill"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}, {"MMA", 1}, {"RPW", 12}, {"TOK_TILE", 16}};
  EXPECT_NE(message(p).find("MMA tiles take RPW a multiple of 8"), std::string::npos) << message(p);
  p = {{"K", 60}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}, {"MMA", 1}, {"TOK_TILE", 16}};
  EXPECT_NE(message(p).find("MMA needs K a multiple of 8"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 1}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 0}, {"MMA", 1}};
  EXPECT_NE(message(p).find("W_LAYOUT 1 takes"), std::string::npos) << message(p);
  // The fused norm: 0..3, on the CUDA-core [N, K] stream only; NORM 3's rows fit shared memory.
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 4}};
  EXPECT_NE(message(p).find("NORM must be 0 (x as is), 1 (rms_norm(x)), 2"), std::string::npos) << message(p);
  p = {{"K", 16384}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 3}, {"TOK_TILE", 8}, {"RPW", 1}};
  EXPECT_NE(message(p).find("NORM 3: TOK_TILE normalised bf16 rows"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 1}, {"MMA", 1}, {"RPW", 8}, {"TOK_TILE", 16}};
  EXPECT_NE(message(p).find("NORM takes W_LAYOUT 0 and MMA 0"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 1}, {"ACC", 0}, {"ROUTED", 0}, {"NORM", 2}};
  EXPECT_NE(message(p).find("NORM takes W_LAYOUT 0 and MMA 0"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 1}, {"ROUTED", 0}, {"NORM", 2}};
  EXPECT_EQ(message(p), "no error");
  // The MoE combine in a residual add's epilogue: ACC 1, [N, K], at most 64 pairs a token.
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 0}, {"ROUTED", 8}, {"NORM", 0}};
  EXPECT_NE(message(p).find("ROUTED takes ACC 1 and W_LAYOUT 0"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 1}, {"ROUTED", 65}, {"NORM", 0}};
  EXPECT_NE(message(p).find("ROUTED (a MoE layer's pairs per token) must be at most 64"), std::string::npos) << message(p);
  p = {{"K", 64}, {"N", 32}, {"X_DT", 0}, {"Y_DT", 0}, {"W_LAYOUT", 0}, {"ACC", 1}, {"ROUTED", 8}, {"NORM", 0}, {"MMA", 1}, {"RPW", 8}, {"TOK_TILE", 16}};
  EXPECT_EQ(message(p), "no error");
}

TEST(CodegenInstantiate, BadParametersAreClearErrors) {
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { instantiate("no_such_family", {}); }).find("unknown kernel family 'no_such_family'"), std::string::npos);
  EXPECT_NE(message([] { instantiate("rms_norm", {{"D", 8}, {"X_DT", 0}}); }).find("missing parameter Y_DT"), std::string::npos);
  EXPECT_NE(message([] { instantiate("rms_norm", {{"D", 8}, {"X_DT", 0}, {"Y_DT", 0}, {"Q", 1}}); }).find("unknown parameter Q"),
            std::string::npos);
  EXPECT_NE(message([] { instantiate("rms_norm", {{"D", 8}, {"X_DT", 7}, {"Y_DT", 0}}); }).find("X_DT must be 0 (f32) or 1 (bf16)"),
            std::string::npos);
  EXPECT_NE(message([] { matmul_int4_kernel(48, 16, ElemType::F32, ElemType::F32); }).find("multiple of the INT4 group"),
            std::string::npos);
  EXPECT_NE(message([] { instantiate("rms_norm", {{"D", 8}, {"X_DT", 0}, {"Y_DT", 0}, {"THREADS", 48}}); }).find("block size"),
            std::string::npos);
  EXPECT_NE(message([] { gqa_attention_kernel(6, 4, 40, ElemType::F32, ElemType::F32, ElemType::F32); }).find("HEADS % KV_HEADS"),
            std::string::npos);
  // A gate and up pair in the siblings' launch (GLU 1): equal rows, an even plain sibling and RPW.
  const std::string glu_rule = "GLU 1 takes a gate and up pair of equal rows (N2 == N3), an even N and an even RPW";
  EXPECT_NE(message([] { matmul_siblings_kernel(256, 8, 16, 12, ElemType::F32, ElemType::F32, "sm_90", 1, true); }).find(glu_rule),
            std::string::npos);
  EXPECT_NE(message([] { matmul_siblings_kernel(256, 7, 16, 16, ElemType::F32, ElemType::F32, "sm_90", 1, true); }).find(glu_rule),
            std::string::npos);
  EXPECT_NE(message([] {
              instantiate("matmul_siblings", {{"K", 256}, {"N", 8}, {"N2", 16}, {"N3", 16}, {"GLU", 1}, {"NORM", 0}, {"X_DT", 0}, {"Y_DT", 0}, {"RPW", 3}});
            }).find(glu_rule),
            std::string::npos);
  EXPECT_EQ(message([] { matmul_siblings_kernel(256, 0, 16, 16, ElemType::F32, ElemType::F32, "sm_90", 1, true); }), "no error");
  EXPECT_NE(message([] { matmul_siblings_kernel(256, 8, 16, 0, ElemType::F32, ElemType::F32, "sm_90", 1, false, 3); })
                .find("NORM must be 0 (x as is), 1 (rms_norm(x)) or 2"),
            std::string::npos);
  EXPECT_EQ(message([] { matmul_siblings_kernel(256, 8, 16, 16, ElemType::F32, ElemType::F32, "sm_90", 1, true, 2); }), "no error");
  // The grouped experts' tensor-core path: INT4 only, m-tile rows, NT 1..16, shared memory
  // (gate/up at K2.6's H: NT 7 staged rows + 8 warps' transposition buffers fit, NT 8 does not).
  auto gate_up = [](int64_t wf, int64_t rows, int64_t nt) {
    return instantiate("moe_grouped_gate_up", {{"H", 7168}, {"I", 2048}, {"E", 384}, {"TOPK", 8}, {"W_FMT", wf}, {"X_DT", 0},
                                               {"ROWS", rows}, {"NT", nt}, {"MMA", 1}, {"ROUTE", 0}, {"RNORM", 0}, {"W_LAYOUT", 0}}, "sm_90");
  };
  EXPECT_NE(message([&] { gate_up(0, 8, 2); }).find("MMA 1 is the INT4 path"), std::string::npos);
  EXPECT_NE(message([&] { gate_up(1, 4, 2); }).find("ROWS must be 8 or 16"), std::string::npos);
  EXPECT_NE(message([&] { gate_up(1, 8, 8); }).find("224 KiB"), std::string::npos);
  EXPECT_EQ(message([&] { gate_up(1, 16, 7); }), "no error");
  EXPECT_NE(message([] {
              instantiate("moe_grouped_down", {{"H", 7168}, {"I", 2048}, {"E", 384}, {"TOPK", 8}, {"W_FMT", 1}, {"ROWS", 16}, {"NT", 17}, {"MMA", 1}, {"W_LAYOUT", 0}});
            }).find("NT must be 1..16"),
            std::string::npos);
  EXPECT_NE(message([] {
              instantiate("moe_grouped_down", {{"H", 7168}, {"I", 2048}, {"E", 384}, {"TOPK", 8}, {"W_FMT", 1}, {"ROWS", 16}, {"NT", 8}, {"MMA", 5}, {"W_LAYOUT", 0}});
            }).find("MMA must be 0 (CUDA cores), 1 or 2 (tensor cores: scales shared by shuffles / loaded by each lane), 3 or 4"),
            std::string::npos);
  EXPECT_NE(message([] {
              instantiate("moe_grouped_down", {{"H", 7168}, {"I", 2048}, {"E", 384}, {"TOPK", 8}, {"W_FMT", 1}, {"ROWS", 16}, {"NT", 8}, {"MMA", 1}, {"PF", 4}, {"W_LAYOUT", 0}});
            }).find("PF (steps of loads in flight ahead of the math) must be 0..3"),
            std::string::npos);
  // The shared-memory ring: 2..8 stages, the MMA path's, one m-tile a warp, whole 256-column
  // steps, PF 0, and its stages counted in the shared memory (16 warps x 4 stages beside NT 4 at
  // K2.6's H: 112 + 144 KiB do not fit; 3 stages, 108 KiB, do).
  auto ring = [](ParamValues p) {
    p.insert({{"H", 7168}, {"I", 2048}, {"E", 384}, {"TOPK", 8}, {"W_FMT", 1}, {"X_DT", 0}, {"WARPS", 16}, {"ROWS", 8}, {"NT", 4}, {"PF", 0},
              {"MMA", 2}, {"ROUTE", 0}, {"RNORM", 0}});
    p.try_emplace("W_LAYOUT", 0);
    return instantiate("moe_grouped_gate_up", p, "sm_90");
  };
  EXPECT_EQ(message([&] { ring({{"RING", 3}}); }), "no error");
  EXPECT_NE(message([&] { ring({{"RING", 1}}); }).find("RING (shared-memory stages a warp) must be 0 (the PF register ring) or 2..8"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 9}}); }).find("must be 0 (the PF register ring) or 2..8"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 4}}); }).find("224 KiB"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 3}, {"ROWS", 16}}); }).find("RING: ROWS must be 8 (one m-tile a warp)"), std::string::npos);
  // The router folded in (ROUTE: tokens the launch routes, 0..64), its shared memory beside the
  // ring's still within 227 KiB, and steps past ROUTE refused by the launch geometry.
  EXPECT_EQ(message([&] { ring({{"RING", 3}, {"ROUTE", 64}, {"RNORM", 1}}); }), "no error");
  EXPECT_NE(message([&] { ring({{"RING", 3}, {"ROUTE", 65}}); }).find("ROUTE (tokens the launch routes itself) must be 0..64"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 3}, {"RNORM", 2}}); }).find("RNORM (norm_topk_prob) must be 0 or 1"), std::string::npos);
  EXPECT_NE(message([&] { launch_dims(ring({{"RING", 3}, {"ROUTE", 8}, {"RNORM", 1}}), 9); }).find("a step of 9 tokens is past ROUTE 8"),
            std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 3}, {"PF", 1}}); }).find("RING replaces PF's register ring: PF must be 0"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 3}, {"MMA", 0}, {"ROWS", 1}}); }).find("RING is the tensor-core path's (MMA 1..4)"), std::string::npos);
  // W_LAYOUT 1 (the experts in ir/support/int4_frag.h's order): the tensor-core path, either ring,
  // over whole octets of rows and 128-column sub-blocks only.
  EXPECT_EQ(message([&] { ring({{"RING", 0}, {"PF", 1}, {"W_LAYOUT", 1}}); }), "no error");
  EXPECT_EQ(message([&] { ring({{"RING", 3}, {"W_LAYOUT", 1}}); }), "no error");
  EXPECT_NE(message([&] { ring({{"RING", 0}, {"PF", 1}, {"W_LAYOUT", 2}}); }).find("W_LAYOUT must be 0 (the checkpoint's rows) or 1"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 3}, {"MMA", 0}, {"ROWS", 1}, {"W_LAYOUT", 1}}); }).find("RING is the tensor-core path's"),
            std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 0}, {"MMA", 0}, {"ROWS", 1}, {"W_LAYOUT", 1}}); }).find("W_LAYOUT 1 is the tensor-core path's"),
            std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 0}, {"PF", 1}, {"H", 7168 + 32}, {"W_LAYOUT", 1}}); }).find("a multiple of 128"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 0}, {"PF", 1}, {"I", 2052}, {"W_LAYOUT", 1}}); }).find("whole octets of rows"), std::string::npos);
  EXPECT_NE(message([&] { ring({{"RING", 2}, {"H", 7200}}); }).find("a multiple of 256"), std::string::npos);
}

TEST(CodegenInstantiate, MinBlocksBoundsTheEntryNotTheTemplate) {
  // MINB (the grouped experts' minimum resident blocks an SM) goes to the entry's
  // __launch_bounds__, so ptxas caps the registers; it is no template argument, and an instance
  // without it keeps the id it had before the parameter existed.
  auto gate_up = [](int64_t minb) {
    return instantiate("moe_grouped_gate_up", {{"H", 7168}, {"I", 2048}, {"E", 384}, {"TOPK", 8}, {"W_FMT", 1}, {"X_DT", 0}, {"ROUTE", 0},
                                               {"RNORM", 0}, {"W_LAYOUT", 1}, {"XB", 1}, {"WARPS", 8}, {"MINB", minb}}, "sm_90");
  };
  const KernelSource none = gate_up(0), three = gate_up(3);
  EXPECT_EQ(none.id.find("_mb"), std::string::npos) << none.id;
  EXPECT_NE(none.source.find("__launch_bounds__(256) "), std::string::npos);
  EXPECT_EQ(three.id, none.id + "_mb3");
  EXPECT_NE(three.source.find("__launch_bounds__(256, 3) "), std::string::npos);
  EXPECT_NE(three.source.find("moe_grouped_gate_up<7168, 2048, 384, 8, 1, 0, 8, "), std::string::npos);
  EXPECT_NE(three.source.find(", 1, 1, 0, 0, 0>("), std::string::npos) << "the template's last arguments are W_LAYOUT, XB, TMA, KS, GPF: "
                                                                      << three.source;
  // The entry runs the GPF prologue (an empty one at GPF 0) before the PDL wait.
  EXPECT_LT(three.source.find("kp::moe_grouped_gate_up_prefetch<"), three.source.find("kp::grid_dependency_begin();"));
  try {
    gate_up(33);
    ADD_FAILURE() << "MINB 33 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MINB (minimum resident blocks an SM) must be 0..32"), std::string::npos) << e.what();
  }
}

TEST(CodegenInstantiate, EveryFamilySignatureMatchesItsHeaderDoc) {
  // Each argument name appears in the template header (its doc block and parameter list), so the
  // registry and the headers cannot drift apart silently.
  const TemplateLibrary& lib = TemplateLibrary::embedded();
  for (const Family* f : all_families()) {
    if (!f->library.empty()) continue;  // a library call: its doc block is its families/<name>.h
    const std::string& text = lib.header(f->header);
    EXPECT_NE(text.find("void " + f->function.substr(4) + "("), std::string::npos) << f->name;
    for (const KernelArg& a : f->signature) EXPECT_NE(text.find(a.name), std::string::npos) << f->name << " " << a.name;
    for (const ParamSpec& p : f->params) {  // a launch-bounds parameter is no template argument: its doc names it
      EXPECT_NE(text.find(p.min_blocks ? p.name : "int " + p.name), std::string::npos) << f->name << " " << p.name;
    }
  }
}

TEST(CodegenInstantiate, EmbeddedTemplatesMatchTheSourceTree) {
  const TemplateLibrary tree = TemplateLibrary::from_directory(std::string(KPLAN_SOURCE_DIR) + "/kernels_templates");
  // Beside the templates: the ir/support headers written for the host and the device.
  std::map<std::string, std::string> sources = tree.headers();
  for (const char* name : {"synthetic_values.h", "sample_draws.h", "int4_frag.h"})
    sources[name] = kplan::testing_util::read_file(std::string(KPLAN_SOURCE_DIR) + "/ir/support/" + name);
  EXPECT_EQ(sources, TemplateLibrary::embedded().headers()) << "rebuild kplan_codegen after editing kernels_templates/";
  const auto inc = tree.includes_of(matmul_kernel(64, 64, ElemType::F32, ElemType::F32).source);
  std::set<std::string> names;
  for (const auto& [name, text] : inc) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"common.cuh", "matmul.cuh", "rms_norm.cuh", "weight_dot.cuh"}));
}

TEST(CodegenInstantiate, ModelKernelSetsCoverEveryFamily) {
  std::set<std::string> families;
  ModelConfig tiny = test_config("tiny");
  for (const KernelSource& k : target_model_kernels(tiny, {})) families.insert(k.family);
  for (const KernelSource& k : draft_model_kernels(test_draft_config("draft-tiny"), {}, 4)) families.insert(k.family);
  families.insert(matmul_int4_kernel(256, 128, ElemType::F32, ElemType::F32).family);  // quantized dense Linears
  families.insert(topk_kernel(1024, 4, ElemType::F32, true).family);
  for (const KernelSource& k :
       {round_draft_inputs_kernel(4, 3), round_tree_kernel(8, 7, 3, 8), round_sample_kernel(8, 1024), round_walk_kernel(8)})
    families.insert(k.family);  // emit-round's, beside a drafter
  families.insert(synthetic_weights_kernel(0, ElemType::BF16, 0).family);  // load time, not an op's
  families.insert(cublaslt_matmul_call(256, 256, ElemType::F32, true).family);  // a long step's library call
  // The attention's combine with W_UV (attention_uv.h): latents of 256 columns and more (K2.6's 512), not the tiny model's.
  families.insert(mla_split_combine_uv_kernel(64, 512, 128, ElemType::BF16, ElemType::BF16).family);
  for (const Family* f : all_families()) EXPECT_TRUE(families.count(f->name)) << f->name;
  // Instances are unique.
  std::set<std::string> ids;
  for (const KernelSource& k : target_model_kernels(tiny, {})) EXPECT_TRUE(ids.insert(k.id).second) << k.id;
}

TEST(CodegenInstantiate, Int4CheckpointsUseInt4Experts) {
  ModelConfig c = test_config("tiny");
  c.quant.enabled = true;
  bool int4_gate_up = false;
  for (const KernelSource& k : target_model_kernels(c, {})) {
    if (k.family == "moe_grouped_gate_up") int4_gate_up = kernel_param(k, "W_FMT") == 1;
  }
  EXPECT_TRUE(int4_gate_up);
}

TEST(CodegenLaunchGeometry, GridsFollowTheTemplateDocs) {
  const KernelSource mm = matmul_kernel(256, 1030, ElemType::F32, ElemType::F32);
  LaunchDims d = launch_dims(mm, 17);
  EXPECT_EQ(d.grid, (std::array<uint32_t, 3>{3, 258, 1}));  // 8 tokens per block (x, fastest), 4 rows per block
  const KernelSource split = matmul_kernel(7168, 576, ElemType::F32, ElemType::F32);  // 4 warps: 1 row, K split 4 ways
  EXPECT_EQ(launch_dims(split, 64).grid, (std::array<uint32_t, 3>{8, 576, 1}));
  const KernelSource wide = matmul_kernel(7168, 163840, ElemType::F32, ElemType::F32);  // 4 warps of 4 rows
  EXPECT_EQ(launch_dims(wide, 1).grid, (std::array<uint32_t, 3>{1, 10240, 1}));
  EXPECT_EQ(d.block, (std::array<uint32_t, 3>{128, 1, 1}));
  const KernelSource kn = matmul_kernel(32, 64, ElemType::F32, ElemType::F32, /*weight_kn=*/true);
  d = launch_dims(kn, 1, /*batch=*/4);
  EXPECT_EQ(d.grid, (std::array<uint32_t, 3>{1, 1, 4}));
  const KernelSource mla = mla_attention_kernel(4, 64, 16, ElemType::F32, ElemType::F32, ElemType::F32);
  d = launch_dims(mla, 32);
  EXPECT_EQ(d.grid, (std::array<uint32_t, 3>{4, 32, 1}));
  // The fused norm + ropes + append (K2.6: 64 heads of R 64, 8 a block of 256 threads): a token's
  // cache-row block, then 8 query-head blocks; without query heads the row block alone.
  const KernelSource ra = mla_rope_append_kernel(512, 64, 64, true, ElemType::F32, ElemType::F32, ElemType::BF16, "sm_90");
  EXPECT_EQ(launch_dims(ra, 3).grid, (std::array<uint32_t, 3>{3, 9, 1}));
  EXPECT_EQ(launch_dims(ra, 3).block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(launch_dims(mla_rope_append_kernel(512, 64, 0, true, ElemType::F32, ElemType::F32, ElemType::BF16, "sm_90"), 2).grid,
            (std::array<uint32_t, 3>{2, 1, 1}));
  // Grouped experts: tiles of 8 rows of I (8 warps x 1), one block row per expert slot:
  // min(E, tokens * top_k) slots (5 tokens x top-2 over 8 experts: 8; 1 token: 2); 17 tiles are
  // fewer than BLOCKS asks per expert, so a block each.
  const KernelSource up = moe_grouped_gate_up_kernel(256, 136, 8, 2, false, ElemType::F32);
  d = launch_dims(up, 5);
  EXPECT_EQ(d.grid, (std::array<uint32_t, 3>{17, 8, 1}));
  EXPECT_EQ(d.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(launch_dims(up, 1).grid, (std::array<uint32_t, 3>{17, 2, 1}));
  EXPECT_EQ(d.smem_bytes, 2u * 4096);  // NT 2 staged rows of H = 256 (one 1024-column chunk)
  const KernelSource down = moe_grouped_down_kernel(256, 136, 8, 2, false);
  EXPECT_EQ(launch_dims(down, 3).grid, (std::array<uint32_t, 3>{16, 6, 1}));  // 16 rows of H per block (8 warps x 2)
  EXPECT_EQ(launch_dims(down, 3).smem_bytes, 3u * 4096);
  // K2.6 width at 1 token (8 experts), INT4 on the tensor cores (sm90.cc): gate/up BLOCKS 132 over
  // 8 experts, 16 a expert; NT 4 staged rows of H as bf16 hi + lo (4 bytes an element). Down: 56
  // tiles of 128 rows (16 a warp, 8 warps) dealt evenly over at most 33 blocks, 2 a block. With
  // RING 3 the 16 warps' 3 stages of 2304 bytes follow the staged rows.
  const KernelSource k26_up = moe_grouped_gate_up_kernel(7168, 2048, 384, 8, true, ElemType::F32, "sm_90");
  EXPECT_EQ(launch_dims(k26_up, 1).grid, (std::array<uint32_t, 3>{16, 8, 1}));
  EXPECT_EQ(launch_dims(k26_up, 1).smem_bytes, 4u * 7168 * 4);
  const KernelSource k26_ring = moe_grouped_gate_up_kernel(7168, 2048, 384, 8, true, ElemType::F32, "sm_90", {{"RING", 3}});
  EXPECT_EQ(kernel_param(k26_ring, "PF"), 0);  // the ring replaces the register ring
  EXPECT_EQ(launch_dims(k26_ring, 1).smem_bytes, 4u * 7168 * 4 + 16 * 3 * 2304);
  EXPECT_EQ(launch_dims(moe_grouped_down_kernel(7168, 2048, 384, 8, true, "sm_90"), 1).grid, (std::array<uint32_t, 3>{28, 8, 1}));
  // 64 tokens: 384 slots, 8 pairs an expert expected: 2 chunks of NT 4 over grid.z, 2 blocks an
  // expert (132 over 64 expected experts).
  EXPECT_EQ(launch_dims(k26_up, 64).grid, (std::array<uint32_t, 3>{2, 384, 2}));
  const KernelSource combine = moe_combine_kernel(256, 2, ElemType::F32, false);
  EXPECT_EQ(launch_dims(combine, 3).grid, (std::array<uint32_t, 3>{1, 3, 1}));
  const KernelSource norm = rms_norm_kernel(256, ElemType::F32, ElemType::F32);
  d = launch_dims(norm, 7);
  EXPECT_EQ(d.grid, (std::array<uint32_t, 3>{7, 1, 1}));
  EXPECT_EQ(d.smem_bytes, 0u);
  const KernelSource compact = kv_compact_kernel(64, 16, ElemType::F32);
  EXPECT_EQ(launch_dims(compact, 123).grid, (std::array<uint32_t, 3>{1, 1, 1}));
}

TEST(CodegenArch, CanonicalNamesAndClearRefusals) {
  EXPECT_EQ(canonical_arch("sm_90"), "sm_90");
  EXPECT_EQ(canonical_arch("sm90"), "sm_90");
  EXPECT_EQ(canonical_arch("120"), "sm_120");
  EXPECT_EQ(canonical_arch("sm_90a"), "sm_90a");
  EXPECT_THROW(canonical_arch("sm_1"), Error);
  EXPECT_THROW(canonical_arch("hopper"), Error);
  EXPECT_THROW(canonical_arch(""), Error);
  try {
    canonical_arch("sm_37");
    FAIL() << "sm_37 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("supported: "), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("sm_90"), std::string::npos);
  }
  const auto archs = nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_120"), archs.end()) << "this NVRTC cannot target Blackwell";
}

}  // namespace
}  // namespace kplan::codegen
