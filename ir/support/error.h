#pragma once
// kplan::Error: the one exception type for user-facing failures (bad input, unsupported config,
// damaged files). Its message is one line that names the problem and, where known, the file.
#include <stdexcept>
#include <string>

namespace kplan {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kplan
