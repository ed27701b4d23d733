#pragma once
// Helpers shared by the codegen tests: test configs and fresh temporary cache directories.
#include <atomic>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"

namespace kplan::codegen::testing_util {

inline ModelConfig test_config(const std::string& name) {
  if (name == "kimi-k2.6") return load_model_config(std::string(KPLAN_TEST_DATA_DIR) + "/kimi-k2.6/config.json");
  return load_model_config(std::string(KPLAN_TEST_DATA_DIR) + "/configs/" + name + ".json");
}

inline DraftConfig test_draft_config(const std::string& name) {
  return load_draft_config(std::string(KPLAN_TEST_DATA_DIR) + "/configs/" + name + ".json");
}

// A new empty directory under the test temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("kplan_codegen_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace kplan::codegen::testing_util
