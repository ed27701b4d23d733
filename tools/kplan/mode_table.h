#pragma once
// The per-mode table `kplan run --spec compare` and `kplan bench --acceptance` print: a row per
// decode mode with tokens, rounds, mean acceptance length, target forwards, wall time, tokens/s
// and the speed-up against AR; columns as wide as their widest cell.
#include <cstddef>
#include <string>
#include <vector>

#include "tools/kplan/timed_generate.h"

namespace kplan::cli {

// Cells are left-aligned in the first `left_columns` columns (labels), right-aligned after (figures).
class TextTable {
 public:
  TextTable(std::vector<std::string> headers, size_t left_columns);
  void add_row(std::vector<std::string> cells);  // as many cells as headers
  std::string str() const;                       // header line, then one line per row

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0]: the headers
  size_t left_columns_;
};

// The figure columns of a mode row, and their cells for `mode` against plain AR's figures.
std::vector<std::string> mode_headers();
std::vector<std::string> mode_cells(const DecodeFigures& mode, const DecodeFigures& ar);

// printf-style formatting of one number into a cell.
std::string format_cell(const char* format, double value);

}  // namespace kplan::cli
