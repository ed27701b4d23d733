// `kplan bench --kernels` (tools/kplan/kernel_table.h, cmd_bench.cc): launches grouped by kernel
// instance and family with their time, bytes, GB/s and share of the floor, as a table and JSON;
// bad --hbm-gbps / --kernel-tokens refused by name before any GPU is needed; on a GPU the table
// of a 1- and a 16-token step (skipped without one).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"
#include "tools/kplan/kernel_table.h"

namespace kplan {
namespace {

kplan_kernel_time launch(int32_t i, const char* kernel, const char* family, double ms, double weights, double acts) {
  return kplan_kernel_time{i, kernel, family, "op", ms, weights, acts};
}

TEST(BenchKernels, GroupsByKernelAndFamilyWithBandwidthAndFloorShare) {
  const std::vector<kplan_kernel_time> l = {
      launch(0, "matmul_a", "matmul", 0.5, 2e9, 0), launch(1, "rms_norm_x", "rms_norm", 0.01, 0, 1e6),
      launch(2, "matmul_b", "matmul", 0.25, 4e8, 1e8), launch(3, "matmul_a", "matmul", 0.5, 2e9, 0)};
  const std::vector<cli::KernelGroup> kernels = cli::group_launches(l, false);
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_EQ(kernels[0].name, "matmul_a");
  EXPECT_EQ(kernels[0].launches, 2);
  EXPECT_DOUBLE_EQ(kernels[0].ms, 1.0);
  EXPECT_DOUBLE_EQ(kernels[0].gbps(), 4000.0);  // 4e9 bytes in 1 ms
  EXPECT_NEAR(kernels[0].floor_percent(5000), 80.0, 1e-9);
  EXPECT_EQ(kernels[1].name, "matmul_b");
  EXPECT_DOUBLE_EQ(kernels[1].gbps(), 2000.0);
  const std::vector<cli::KernelGroup> families = cli::group_launches(l, true);
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "matmul");
  EXPECT_EQ(families[0].launches, 3);
  EXPECT_DOUBLE_EQ(families[0].bytes(), 4.5e9);
  const std::string table = cli::kernel_table(1, l, 4300);
  EXPECT_NE(table.find("step of 1 token: 4 launches, 1.2600 ms summed, floor 4300 GB/s"), std::string::npos) << table;
  EXPECT_NE(table.find("matmul_a"), std::string::npos);
  EXPECT_NE(table.find("93.0%"), std::string::npos) << table << "matmul_a: 4000 of 4300 GB/s";
  const nlohmann::json j = cli::kernel_json(16, l, 4300);
  EXPECT_EQ(j["tokens"], 16);
  EXPECT_EQ(j["launches"].size(), 4u);
  EXPECT_EQ(j["kernels"][0]["name"], "matmul_a");
  EXPECT_EQ(j["families"][0]["launches"], 3);
  EXPECT_NEAR(j["total"]["gb_per_s"].get<double>(), 4.501e9 / 1.26e-3 / 1e9, 1e-6);
}

TEST(BenchKernels, InGraphTableListsLaunchesInStepOrderAndSumsFamilies) {
  const std::vector<kplan_kernel_time> l = {launch(0, "rms_norm_x", "rms_norm", 0.006, 0, 1e6), launch(1, "matmul_a", "matmul", 0.5, 2e9, 0),
                                            launch(2, "rms_norm_x", "rms_norm", 0.005, 0, 1e6)};
  const std::vector<double> graph = {0.002, 0.45, 0.001};
  const std::string table = cli::graph_marginal_table(1, l, graph);
  EXPECT_NE(table.find("step of 1 token inside its graph: 3 launches, 0.4530 ms"), std::string::npos) << table;
  EXPECT_LT(table.find("    0     0.0060     0.0020  rms_norm_x"), table.find("    1     0.5000     0.4500  matmul_a")) << table;
  EXPECT_NE(table.find("    2     0.0050     0.0010  rms_norm_x"), std::string::npos) << table;
  // Families by their summed marginal, the largest first, with their share of the graph's sum.
  const size_t matmul = table.find("matmul                                       1     0.4500   99.3%");
  const size_t norm = table.find("rms_norm                                     2     0.0030    0.7%");
  ASSERT_NE(matmul, std::string::npos) << table;
  ASSERT_NE(norm, std::string::npos) << table;
  EXPECT_LT(matmul, norm);
  const nlohmann::json j = cli::kernel_json(1, l, 4300, graph);
  EXPECT_DOUBLE_EQ(j["launches"][1]["graph_ms"].get<double>(), 0.45);
  EXPECT_FALSE(cli::kernel_json(1, l, 4300)["launches"][1].contains("graph_ms")) << "no --in-graph, no figure";
}

class BenchKernelsCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing_util::TempDir("bench_kernels");
    const test::SynthPair pair = test::synth_tiny_pair(scratch_->path());
    plan_ = scratch_->path() / "t.kplan";
    const test::CliResult r = test::run_kplan("compile --model " + pair.target.string() + " -o " + plan_.string(), scratch_->path());
    ASSERT_EQ(r.status, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete scratch_;
    scratch_ = nullptr;
  }
  test::CliResult kplan(const std::string& args) { return test::run_kplan(args, scratch_->path()); }
  static testing_util::TempDir* scratch_;
  static std::filesystem::path plan_;
};
testing_util::TempDir* BenchKernelsCli::scratch_ = nullptr;
std::filesystem::path BenchKernelsCli::plan_;

TEST_F(BenchKernelsCli, BadFloorAndStepsAreRefusedByName) {
  test::CliResult r = kplan("bench " + plan_.string() + " --kernels --hbm-gbps 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--hbm-gbps must be a positive bandwidth"), std::string::npos) << r.err;
  r = kplan("bench " + plan_.string() + " --kernels --kernel-tokens 1,3");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--kernel-tokens: the plan has no target bucket of 3 tokens (its buckets: 1,4,8,16,32,64)"), std::string::npos)
      << r.err;
  r = kplan("bench " + plan_.string() + " --in-graph");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--in-graph times the launches of --kernels' steps: give --kernels too"), std::string::npos) << r.err;
  r = kplan("bench " + plan_.string() + " --kernels --kernel-tokens 1,x");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--kernel-tokens"), std::string::npos) << r.err;
}

TEST_F(BenchKernelsCli, TablesAndJsonOfAnArAndAVerifyStep) {
  const std::filesystem::path json = scratch_->path() / "k.json";
  const test::CliResult r = kplan("bench " + plan_.string() + " --steps 5 --kernels --json " + json.string());
  if (r.status != 0 && r.err.find("no GPU") != std::string::npos) GTEST_SKIP() << "no GPU on this machine";
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("step of 1 token:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step of 16 tokens:"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(testing_util::read_file(json));
  ASSERT_EQ(j["kernel_steps"].size(), 2u);
  for (const nlohmann::json& s : j["kernel_steps"]) {
    EXPECT_GT(s["total"]["ms"].get<double>(), 0);
    EXPECT_GT(s["total"]["weight_bytes"].get<double>(), 0);
    bool lm_head = false;
    for (const nlohmann::json& l : s["launches"]) {
      EXPECT_GT(l["ms"].get<double>(), 0) << l.dump();
      lm_head = lm_head || l["op"].get<std::string>().find("lm_head") != std::string::npos;
    }
    EXPECT_TRUE(lm_head) << "the launches carry their ops";
  }
}

// --in-graph on a GPU: every launch of the step gets a marginal time inside the step's graph, and
// their sum is the whole step's graph replay (the prefixes telescope), within replay jitter.
TEST_F(BenchKernelsCli, InGraphMarginalsSumToTheStep) {
  const std::filesystem::path json = scratch_->path() / "g.json";
  const test::CliResult r = kplan("bench " + plan_.string() + " --steps 20 --kernels --in-graph --kernel-tokens 1 --json " + json.string());
  if (r.status != 0 && r.err.find("no GPU") != std::string::npos) GTEST_SKIP() << "no GPU on this machine";
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("step of 1 token inside its graph:"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(testing_util::read_file(json));
  ASSERT_EQ(j["kernel_steps"].size(), 1u);
  double sum = 0;
  for (const nlohmann::json& l : j["kernel_steps"][0]["launches"]) {
    ASSERT_TRUE(l.contains("graph_ms")) << l.dump();
    sum += l["graph_ms"].get<double>();
  }
  const double step = j["decode_step_ms_median"].get<double>();
  EXPECT_NEAR(sum, step, 0.25 * step + 0.01) << "the prefixes' last graph is the whole step";
}

}  // namespace
}  // namespace kplan
