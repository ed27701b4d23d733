#pragma once
// Helpers shared by the unit tests of several areas: fresh temp dirs, scoped environment switches, whole-file reads,
// expecting a kplan::Error whose message holds given fragments, and the CPU reference over a
// checkpoint directory (its in-memory plan; link kplan_driver and kplan_runtime to use it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/driver/reference_plan.h"
#include "ir/support/error.h"
#include "runtime/plan_cpu_target.h"

namespace kplan::testing_util {

// A fresh empty directory under the system temp dir, removed when the object dies. The pid and
// a per-process counter keep parallel test processes and repeated tags apart.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("kplan_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The whole file as bytes.
// Environment variables set for the object's life (a compile switch a test measures), each put
// back as it was (unset when it was) when the object dies.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      setenv(name, value, 1);
    }
  }
  ScopedEnv(const char* name, const char* value) : ScopedEnv({{name, value}}) {}
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) old ? setenv(name, old->c_str(), 1) : unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

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

// A checkpoint directory on the CPU reference, through the same door as a .kplan file: its
// reference plan (with the drafter when `draft` is given), the target over it, and the DFlash
// drafter over the same plan when there is one.
struct ReferenceModel {
  std::shared_ptr<const plan::Plan> plan;
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<Drafter> drafter;
};

inline ReferenceModel reference_model(const std::filesystem::path& target_dir, int64_t max_context = 0,
                                      const std::optional<std::filesystem::path>& draft = std::nullopt) {
  ReferenceModel m;
  m.plan = std::make_shared<const plan::Plan>(reference_plan(target_dir, {.draft = draft}));
  m.target = make_plan_cpu_target(m.plan, target_dir.string(), max_context);
  if (draft) m.drafter = make_plan_cpu_drafter(m.plan, draft->string());
  return m;
}

// The target alone.
inline std::unique_ptr<TargetModel> reference_target(const std::filesystem::path& target_dir, int64_t max_context = 0) {
  return reference_model(target_dir, max_context).target;
}

}  // namespace kplan::testing_util
