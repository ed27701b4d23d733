#pragma once
// Views: where a value's elements live, relative to the value that owns its storage (a function
// argument, a weight, or an op result). Slice, reshape and transpose are views (strides and
// offsets, never copies); a concat read only by kv_append is deferred (its parts go to the
// cache row by row); kv_append / kv_compact results are their cache operand (in place).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/support/dtype.h"

namespace kplan::passes {

struct View {
  const ir::Value* root = nullptr;  // null: a deferred concat
  int64_t offset = 0;               // elements
  DType dtype = DType::F32;
  std::vector<int64_t> shape, strides;
};

// Rows of a view whose last dim is unit-stride and whose leading dims fold into one row index.
struct Rows {
  int64_t rows = 0, width = 0, stride = 0;
};
std::optional<Rows> as_rows(const View& v);

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
bool is_contiguous(const View& v);
int64_t product(const std::vector<int64_t>& shape);

// A type's dims at `tokens`: T (and A, a commit's kept entries) = tokens, W = ceil(tokens / 32),
// S (cached positions) = 0.
std::vector<int64_t> eval_shape(const ir::Type& t, int64_t tokens);

// Ops that are views or bookkeeping, not kernels.
bool is_view_op(const ir::Op& op);     // slice, reshape, transpose
bool launches_kernels(const ir::Op& op);  // everything but weights, views, concat, output
// Ops whose results own a fresh buffer (launches_kernels minus the in-place kv ops).
bool owns_result_storage(const ir::Op& op);

// Views of every value of `fn` at `tokens`; "kv.*" arguments span max_context rows. Throws
// kplan::Error naming the op for a reshape of a strided view.
std::map<const ir::Value*, View> compute_views(const ir::Function& fn, int64_t tokens, int64_t max_context);

// "op 12 (rms_norm) of @target": how errors name an op.
std::string op_label(const ir::Function& fn, int64_t index, const ir::Op& op);

}  // namespace kplan::passes
