#include "tools/kplan/number_list.h"

#include <charconv>
#include <cmath>

#include "ir/support/error.h"

namespace kplan::cli {

std::vector<std::string> split_list(const std::string& text, const ListSyntax& syntax) {
  std::vector<std::string> entries;
  if (text.find_first_not_of(" \t,") == std::string::npos) return entries;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty())
      throw Error(syntax.option + ": empty entry in '" + text + "' (give a list like " + syntax.example + ")");
    entries.push_back(std::move(item));
    start = end + 1;
  }
  return entries;
}

namespace {

template <typename T>
std::vector<T> parse_list(const std::string& text, const ListSyntax& syntax) {
  std::vector<T> values;
  for (const std::string& item : split_list(text, syntax)) {
    T value{};
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    bool ok = ec == std::errc() && ptr == item.data() + item.size();
    if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(value);
    if (!ok) throw Error(syntax.option + ": '" + item + "' is not " + syntax.entry);
    values.push_back(value);
  }
  return values;
}

}  // namespace

std::vector<int64_t> parse_integer_list(const std::string& text, const ListSyntax& syntax) {
  return parse_list<int64_t>(text, syntax);
}

std::vector<double> parse_number_list(const std::string& text, const ListSyntax& syntax) {
  return parse_list<double>(text, syntax);
}

}  // namespace kplan::cli
