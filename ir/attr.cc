#include "ir/attr.h"

#include <charconv>
#include <cmath>

#include "ir/support/error.h"

namespace kplan::ir {

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // stays a float when read back
  return s;
}

std::string attr_str(const Attr& a) {
  if (auto* i = std::get_if<int64_t>(&a)) return std::to_string(*i);
  if (auto* f = std::get_if<double>(&a)) return format_float(*f);
  if (auto* b = std::get_if<bool>(&a)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&a)) {
    std::string out = "\"";
    for (char c : *s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  }
  const auto& list = std::get<std::vector<int64_t>>(a);
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(list[i]);
  }
  return out + "]";
}

const Attr* Attrs::find(std::string_view key) const {
  for (const auto& [k, v] : entries_)
    if (k == key) return &v;
  return nullptr;
}

void Attrs::set(std::string key, Attr value) {
  for (auto& [k, v] : entries_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  entries_.emplace_back(std::move(key), std::move(value));
}

void Attrs::erase(std::string_view key) {
  std::erase_if(entries_, [&](const auto& e) { return e.first == key; });
}

namespace {
template <typename T>
const T& get_as(const Attrs& attrs, std::string_view key, const char* kind) {
  const Attr* a = attrs.find(key);
  if (!a) throw Error("missing attribute '" + std::string(key) + "'");
  const T* v = std::get_if<T>(a);
  if (!v) throw Error("attribute '" + std::string(key) + "' must be " + kind);
  return *v;
}
}  // namespace

int64_t Attrs::get_int(std::string_view key) const {
  return get_as<int64_t>(*this, key, "an integer");
}
double Attrs::get_float(std::string_view key) const {
  const Attr* a = find(key);
  if (a)
    if (auto* i = std::get_if<int64_t>(a)) return static_cast<double>(*i);
  return get_as<double>(*this, key, "a float");
}
bool Attrs::get_bool(std::string_view key) const { return get_as<bool>(*this, key, "a boolean"); }
const std::string& Attrs::get_string(std::string_view key) const {
  return get_as<std::string>(*this, key, "a string");
}
const std::vector<int64_t>& Attrs::get_ints(std::string_view key) const {
  return get_as<std::vector<int64_t>>(*this, key, "an integer list");
}

}  // namespace kplan::ir
