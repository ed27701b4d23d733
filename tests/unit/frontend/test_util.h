#pragma once
// Shared helpers for the frontend tests: test data paths, JSON loading, and expecting a
// kplan::Error whose message holds given fragments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/frontend/json_fields.h"
#include "ir/error.h"

namespace kplan::testing_util {

inline std::filesystem::path data_path(const std::string& rel) {
  return std::filesystem::path(KPLAN_TEST_DATA_DIR) / rel;
}

inline nlohmann::json load_json(const std::string& rel) { return read_json_file(data_path(rel).string()); }

// Runs `f`, expects a kplan::Error, and returns its message ("" and a test failure otherwise).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected kplan::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected kplan::Error, nothing was thrown";
  return "";
}

inline void expect_contains(const std::string& message, std::initializer_list<std::string> fragments) {
  for (const auto& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
}

// A fresh empty directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("kplan_frontend_" + tag + "_" + std::to_string(::getpid()) + "_" +
             std::to_string(reinterpret_cast<uintptr_t>(this)));
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

}  // namespace kplan::testing_util
