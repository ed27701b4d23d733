// Input paths that are not regular files (issue 12): a FIFO where config.json, the shard index, a
// shard, a tokenizer file or a plan should be blocked the reader forever; a symbolic-link loop
// ended in std::filesystem's "Too many levels of symbolic links" as an internal error; a device
// (/dev/zero) is read without end. Each is now refused before it is opened, naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/synth/presets.h"
#include "compiler/synth/synth.h"
#include "runtime/tokenizer/tokenizer_bundle.h"
#include "schemas/plan_reader.h"
#include "tests/unit/frontend/test_util.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using testing_util::error_of;
using testing_util::expect_contains;

void make_fifo(const fs::path& p) {
  fs::remove(p);
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p;
}

void make_loop(const fs::path& p) {
  fs::remove(p);
  fs::create_symlink(p.filename(), p);  // the link names itself
}

TEST(HostilePaths, ConfigJsonThatIsAFifoALoopOrADevice) {
  testing_util::TempDir dir("kplan_hostile");
  const fs::path cfg = dir.path() / "config.json";
  make_fifo(cfg);
  expect_contains(error_of([&] { load_model_config(cfg); }), {"config.json", "is a FIFO, not a regular file"});
  make_loop(cfg);
  expect_contains(error_of([&] { load_model_config(cfg); }), {"config.json", "too many levels of symbolic links"});
  expect_contains(error_of([&] { load_model_config("/dev/zero"); }), {"/dev/zero", "is a device"});
}

TEST(HostilePaths, ShardIndexAndShardThatAreFifos) {
  testing_util::TempDir dir("kplan_hostile");
  synthesize_target(preset_config("tiny"), dir.path() / "tiny", {.seed = 1, .shard_bytes = 1 << 20});
  const fs::path index = dir.path() / "tiny" / "model.safetensors.index.json";
  ASSERT_TRUE(fs::exists(index));
  fs::path shard;
  for (const auto& e : fs::directory_iterator(dir.path() / "tiny"))
    if (e.path().extension() == ".safetensors") shard = e.path();
  ASSERT_FALSE(shard.empty());
  make_fifo(shard);
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir.path() / "tiny"); }),
                  {shard.filename().string(), "is a FIFO, not a regular file"});
  make_fifo(index);
  expect_contains(error_of([&] { SafetensorsCheckpoint::open(dir.path() / "tiny"); }),
                  {"model.safetensors.index.json", "is a FIFO, not a regular file"});
}

TEST(HostilePaths, TokenizerFilesAndPlansThatAreFifosOrLoops) {
  testing_util::TempDir dir("kplan_hostile");
  make_fifo(dir.path() / "tiktoken.model");
  std::ofstream(dir.path() / "tokenizer_config.json") << "{}";
  EXPECT_TRUE(tokenizer::has_tokenizer_files(dir.path())) << "a FIFO is reported, not skipped";
  expect_contains(error_of([&] { tokenizer::bundle_tokenizer_files(dir.path()); }), {"tiktoken.model", "is a FIFO"});
  std::ofstream(dir.path() / "tiktoken.model.txt") << "";
  fs::remove(dir.path() / "tiktoken.model");
  fs::rename(dir.path() / "tiktoken.model.txt", dir.path() / "tiktoken.model");
  make_loop(dir.path() / "tokenizer_config.json");
  expect_contains(error_of([&] { tokenizer::bundle_tokenizer_files(dir.path()); }),
                  {"tokenizer_config.json", "too many levels of symbolic links"});
  make_fifo(dir.path() / "x.kplan");
  expect_contains(error_of([&] { plan::read_plan(dir.path() / "x.kplan"); }), {"x.kplan", "is a FIFO, not a regular file"});
  make_loop(dir.path() / "y.kplan");
  expect_contains(error_of([&] { plan::read_plan(dir.path() / "y.kplan"); }), {"y.kplan", "too many levels of symbolic links"});
}

}  // namespace
}  // namespace kplan
