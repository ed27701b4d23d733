#pragma once
// Helpers for the frontend tests: test data paths and JSON loading, on top of the shared
// temp dirs and error expectations of tests/unit/test_support.h.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/frontend/json_fields.h"
#include "tests/unit/test_support.h"

namespace kplan::testing_util {

inline std::filesystem::path data_path(const std::string& rel) {
  return std::filesystem::path(KPLAN_TEST_DATA_DIR) / rel;
}

inline nlohmann::json load_json(const std::string& rel) { return read_json_file(data_path(rel).string()); }

}  // namespace kplan::testing_util
