#pragma once
// Comma-separated numbers on the command line: --prompt-ids 1,2,3, --budgets 4,8,16,
// --temperatures 0,0.7. Spaces around entries are allowed; every bad entry is one clear error
// naming the option.
#include <cstdint>
#include <string>
#include <vector>

namespace kplan::cli {

struct ListSyntax {
  std::string option;   // "--budgets"
  std::string entry;    // what one entry is, for errors: "a token id"
  std::string example;  // "4,8,16"
};

// The entries between commas, trimmed; none when the text holds only commas and spaces. Throws
// "<option>: empty entry in '<text>' (give a list like <example>)".
std::vector<std::string> split_list(const std::string& text, const ListSyntax& syntax);

// Throws "<option>: empty entry in '<text>' (give ids like <example>)" or "<option>: '<entry>' is
// not <entry>"; text without any entry gives an empty list (the caller decides if that is bad).
std::vector<int64_t> parse_integer_list(const std::string& text, const ListSyntax& syntax);
// The same for finite real numbers.
std::vector<double> parse_number_list(const std::string& text, const ListSyntax& syntax);

}  // namespace kplan::cli
