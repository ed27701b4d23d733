#include "tools/kplan/mode_table.h"

#include <algorithm>
#include <cstdio>

#include "ir/support/error.h"

namespace kplan::cli {

TextTable::TextTable(std::vector<std::string> headers, size_t left_columns) : left_columns_(left_columns) {
  rows_.push_back(std::move(headers));
}

void TextTable::add_row(std::vector<std::string> cells) {
  if (cells.size() != rows_[0].size())
    throw Error("internal: a table row of " + std::to_string(cells.size()) + " cells under " +
                std::to_string(rows_[0].size()) + " headers");
  rows_.push_back(std::move(cells));
}

std::string TextTable::str() const {
  std::vector<size_t> width(rows_[0].size(), 0);
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string text;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c) line += "  ";
      line += c < left_columns_ ? row[c] + pad : pad + row[c];
    }
    line.erase(line.find_last_not_of(' ') + 1);
    text += line + "\n";
  }
  return text;
}

std::string format_cell(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::vector<std::string> mode_headers() {
  return {"tokens", "rounds", "accept len", "target fwd", "wall s", "tokens/s", "vs AR"};
}

std::vector<std::string> mode_cells(const DecodeFigures& mode, const DecodeFigures& ar) {
  const double ar_rate = ar.tokens_per_second();
  return {std::to_string(mode.tokens),
          std::to_string(mode.rounds),
          format_cell("%.3f", mode.mean_acceptance_length()),
          std::to_string(mode.target_forwards),
          format_cell("%.3f", mode.wall_seconds),
          format_cell("%.1f", mode.tokens_per_second()),
          ar_rate > 0 ? format_cell("%.2fx", mode.tokens_per_second() / ar_rate) : "-"};
}

}  // namespace kplan::cli
