#pragma once
// IR value types: a dtype and a shape whose dims are constants or sums of symbols ("T", "S+T").
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/support/dtype.h"

namespace kplan::ir {

// One dim: sum(symbols) + constant. Symbols are kept sorted so equal dims compare equal.
struct Dim {
  std::vector<std::string> symbols;  // sorted; may repeat ("T+T")
  int64_t constant = 0;

  Dim() = default;
  Dim(int64_t value) : constant(value) {}                 // NOLINT: constants read naturally
  static Dim sym(std::string name) { Dim d; d.symbols.push_back(std::move(name)); return d; }

  bool is_constant() const { return symbols.empty(); }
  // Only valid when is_constant().
  int64_t value() const { return constant; }
  // "256", "T", "S+T", "S+8".
  std::string str() const;
  // Parses str()'s form; nullopt when malformed.
  static std::optional<Dim> parse(std::string_view text);

  bool operator==(const Dim&) const = default;
};

Dim operator+(const Dim& a, const Dim& b);

struct Type {
  DType dtype = DType::F32;
  std::vector<Dim> shape;

  size_t rank() const { return shape.size(); }
  // "f32[T, 256]".
  std::string str() const;
  // Shape only: "[T, 256]".
  std::string shape_str() const;
  bool operator==(const Type&) const = default;
};

// True when a and b hold the same number of elements for every binding of the symbols:
// equal products of constant dims and the same multiset of non-constant dims.
bool same_element_count(const std::vector<Dim>& a, const std::vector<Dim>& b);
// The product of the constant dims; nullopt when it overflows int64 (untrusted IR text can say
// f32[4294967296, 4294967296]: the parser refuses such a type by it).
std::optional<int64_t> constant_element_count(const std::vector<Dim>& dims);

}  // namespace kplan::ir
