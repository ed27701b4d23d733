// The bytes `kplan bench --kernels` charges each launch (runtime/plan_stats.h launch_traffic), on
// the bundled target compiled here through the binary: every dense matmul reads its weight once
// (the absorbed W_UK and W_UV views of kv_b_proj its two halves), the embedding one row per token,
// the routed experts the given share, and the launches of a step together read what plan_traffic
// says a step reads; activations grow with the step's tokens, attention's with the context.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "runtime/plan_stats.h"
#include "schemas/plan_reader.h"
#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

const plan::Plan& compiled_plan() {
  static testing_util::TempDir dir("launch_traffic");
  static const plan::Plan p = [] {
    const std::filesystem::path file = dir.path() / "mini.kplan";
    const test::CliResult r =
        test::run_kplan("compile --model " + std::string(KPLAN_SOURCE_DIR) + "/models/mini-v3 --arch sm_90 -o " + file.string(), dir.path());
    EXPECT_EQ(r.status, 0) << r.err;
    return plan::read_plan(file);
  }();
  return p;
}

int64_t constant(const plan::Kernel& k, const std::string& name) {
  for (const plan::KernelConstant& c : k.constants)
    if (c.name == name) return c.value;
  ADD_FAILURE() << k.id << " has no " << name;
  return 0;
}

TEST(LaunchTraffic, MatmulsReadTheirWeightOnceAndTheStepSumsToPlanTraffic) {
  const plan::Plan& p = compiled_plan();
  const plan::Bucket* b1 = p.bucket_for("target", 1);
  ASSERT_NE(b1, nullptr);
  const std::vector<LaunchTraffic> t = launch_traffic(p, *b1, 100);
  ASSERT_EQ(t.size(), b1->launches.size());
  std::map<uint32_t, double> matmul_bytes_of_weight;
  double weights = 0;
  int matmuls = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const plan::Launch& l = b1->launches[i];
    const plan::Kernel& k = p.kernels[l.kernel];
    weights += t[i].weight_bytes;
    EXPECT_GT(t[i].bytes(), 0) << k.id;
    if (k.family == "uk_rope_append") {  // W_UK's heads (uk_rope_append.h, KPLAN_FUSE_UK_APPEND=1) and the latent norm's weight
      const double norm_weight = 2.0 * constant(k, "C");
      EXPECT_EQ(t[i].weight_bytes, 2.0 * constant(k, "HEADS") * constant(k, "K") * constant(k, "N") + norm_weight) << k.id;
      for (size_t a = 0; a < l.args.size(); ++a)
        if (l.args[a].kind == plan::ArgKind::Weight && k.param_names.at(a) == "w")
          matmul_bytes_of_weight[l.args[a].index] += t[i].weight_bytes - norm_weight;
    }
    if (k.family != "matmul") continue;
    ++matmuls;
    // A fused norm (NORM 1 / 2, norm_matmuls.h) reads its bf16 weight too; 2 writes its rows.
    const double norm_weight = constant(k, "NORM") > 0 ? 2.0 * constant(k, "K") : 0.0;
    EXPECT_EQ(t[i].weight_bytes, 2.0 * l.grid[2] * constant(k, "K") * constant(k, "N") + norm_weight) << k.id;
    const auto bytes = [](int64_t dt) { return dt == 0 ? 4.0 : 2.0; };  // f32 / bf16 (activations stored as bf16 by default)
    // x, y and (ACC 1: a residual add in the epilogue) the residual row.
    const double y_rows = 1 + constant(k, "ACC");
    const double norm_rows = (constant(k, "NORM") == 2 ? constant(k, "K") * bytes(constant(k, "X_DT")) : 0.0) +
                             constant(k, "ROUTED") * constant(k, "N") * 4.0;  // a MoE combine's f32 pair rows
    EXPECT_EQ(t[i].activation_bytes,
              l.grid[2] * (constant(k, "K") * bytes(constant(k, "X_DT")) + y_rows * constant(k, "N") * bytes(constant(k, "Y_DT"))) +
                  norm_rows)
        << k.id << ": x, y (and the residual, the norm's rows, the routed pairs' rows) of 1 token";
    for (size_t a = 0; a < l.args.size(); ++a)
      if (l.args[a].kind == plan::ArgKind::Weight && k.param_names.at(a) == "w")
        matmul_bytes_of_weight[l.args[a].index] += t[i].weight_bytes - norm_weight;
  }
  EXPECT_GT(matmuls, 10);
  // kv_b_proj is read by two head_matmuls (W_UK, W_UV): together exactly the weight.
  for (const auto& [w, bytes] : matmul_bytes_of_weight) EXPECT_EQ(bytes, static_cast<double>(p.weights[w].size)) << p.weights[w].name;
  const PlanTraffic whole = plan_traffic(p, p.model);
  EXPECT_NEAR(weights, whole.step_weight_bytes(1), 1.0);
  // All routed experts touched: the step reads every target weight but the embedding table.
  double all = 0;
  for (const LaunchTraffic& x : launch_traffic(p, *b1, 100, 1.0)) all += x.weight_bytes;
  EXPECT_NEAR(all, static_cast<double>(whole.dense_bytes + whole.expert_bytes + whole.embed_row_bytes), 1.0);
}

TEST(LaunchTraffic, ActivationsFollowTokensAndContext) {
  const plan::Plan& p = compiled_plan();
  const plan::Bucket* b1 = p.bucket_for("target", 1);
  const plan::Bucket* b8 = p.bucket_for("target", 8);
  ASSERT_TRUE(b1 && b8 && b8->tokens == 8);
  ASSERT_EQ(b1->launches.size(), b8->launches.size());
  const std::vector<LaunchTraffic> t1 = launch_traffic(p, *b1, 100), t8 = launch_traffic(p, *b8, 100), far = launch_traffic(p, *b1, 1000);
  bool attention = false;
  for (size_t i = 0; i < t1.size(); ++i) {
    const plan::Kernel& k = p.kernels[b1->launches[i].kernel];
    if (k.family == "matmul") {
      EXPECT_EQ(t8[i].activation_bytes, 8 * t1[i].activation_bytes) << k.id;
      EXPECT_EQ(t8[i].weight_bytes, t1[i].weight_bytes) << k.id << ": an 8-token step reads the weight once too";
    }
    if (k.family == "embedding") EXPECT_EQ(t8[i].weight_bytes, 8 * t1[i].weight_bytes);
    if (k.family == "mla_attention" || k.family == "mla_split_partial") {  // the cache's reader
      attention = true;
      const double row = static_cast<double>(p.kv_caches.at(0).row_bytes);
      EXPECT_GE(far[i].activation_bytes - t1[i].activation_bytes, row * 900 - 1) << "900 more cached rows";
    }
  }
  EXPECT_TRUE(attention);
}

}  // namespace
}  // namespace kplan
