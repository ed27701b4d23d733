#pragma once
// Op attributes: named constants of a few kinds (int, float, bool, string, int list), kept in the
// order they were set so the text form round-trips byte for byte.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kplan::ir {

using Attr = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

// "8", "1e-06", "true", "\"name\"", "[0, 2, 1]" (floats always read back as floats).
std::string attr_str(const Attr& a);
std::string format_float(double v);

class Attrs {
 public:
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const Attr* find(std::string_view key) const;
  // Sets (replacing in place when present, else appending).
  void set(std::string key, Attr value);
  void erase(std::string_view key);

  // Typed getters; throw kplan::Error naming the key when absent or of another kind.
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;  // an int attribute reads as a float too
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const std::vector<int64_t>& get_ints(std::string_view key) const;

  const std::vector<std::pair<std::string, Attr>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  bool operator==(const Attrs&) const = default;

 private:
  std::vector<std::pair<std::string, Attr>> entries_;
};

}  // namespace kplan::ir
