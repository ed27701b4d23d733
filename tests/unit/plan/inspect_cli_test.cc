// `kplan inspect` end to end: sections printed from a written plan, and a damaged plan refused
// with its one-line message and exit status 1; `kplan compile` refusing limits the kernels cannot hold.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "schemas/plan_writer.h"
#include "tests/unit/plan/sample_plan.h"

namespace kplan::plan {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int status = -1;
  std::string output;  // stdout and stderr
};

CliResult run_kplan(const std::string& args) {
  CliResult r;
  std::string cmd = std::string(KPLAN_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int raw = ::pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

fs::path written_sample(const std::string& name) {
  fs::path dir = testing::scratch_dir("kplan_inspect");
  Plan p = testing::sample_plan();
  write_plan(p, dir / name);
  return dir / name;
}

TEST(InspectCli, PrintsTheSummaryByDefault) {
  CliResult r = run_kplan("inspect " + written_sample("a.kplan").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("kplan plan, format version 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model:        deepseek_v3, 4 layers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("buckets:      target/1 (2 launches) target/4 (2 launches)"), std::string::npos) << r.output;
}

TEST(InspectCli, PrintsTheAskedSections) {
  CliResult r = run_kplan("inspect --kernels --weights " + written_sample("b.kplan").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("kernel 1: lm_head_v16_h8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.layers.0.mlp.experts.0.gate_proj.weight_packed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("format version"), std::string::npos) << "no summary when sections are asked for";
}

// `kplan compile --max-context` past the kernels' 32-bit row indices is refused by name before
// any work (issue 12: 2^62 wrapped the slot sizes; 2^32 + 64 reached the kernels as 64).
TEST(CompileCli, RefusesAMaxContextThe32BitKernelsCannotAddress) {
  fs::path dir = testing::scratch_dir("kplan_compile_limits");
  for (const char* n : {"4611686018427387904", "4294967360"}) {
    CliResult r = run_kplan("synth tiny --seed 1 --out " + (dir / "tiny").string() + " >/dev/null && " + KPLAN_BINARY +
                            " compile --model " + (dir / "tiny").string() + " --max-context " + n + " -o " +
                            (dir / "x.kplan").string());
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(std::string("kplan: error: --max-context ") + n + ": at most 2147483647 positions"), std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(dir / "x.kplan"));
  }
}

TEST(InspectCli, RefusesADamagedPlanInOneLine) {
  fs::path file = written_sample("c.kplan");
  fs::resize_file(file, fs::file_size(file) - 1);
  CliResult r = run_kplan("inspect " + file.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "kplan: error: " + file.string() + ": damaged plan: truncated (" +
                          std::to_string(fs::file_size(file)) + " bytes, the header says " +
                          std::to_string(fs::file_size(file) + 1) + ")\n");
}

}  // namespace
}  // namespace kplan::plan
