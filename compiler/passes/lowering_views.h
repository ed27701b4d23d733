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

// A type's dims at `tokens`: T (and A, a commit's kept entries, and C, a drafter context step's
// rows) = tokens, W = ceil(tokens / 32), S (cached positions) = 0.
std::vector<int64_t> eval_shape(const ir::Type& t, int64_t tokens);

// Ops that are views or bookkeeping, not kernels.
bool is_view_op(const ir::Op& op);     // slice, reshape, transpose
bool launches_kernels(const ir::Op& op);  // everything but weights, views, concat, output
// The index of the first op after ops[i] that launches kernels, else ops.size().
size_t next_launching_op(const std::vector<ir::Op*>& ops, size_t i);
// The value whose storage `v` reads: `v` itself, or the source of its chain of views.
const ir::Value* view_root(const ir::Value* v);
// A concat read only by kv_append (its parts go to the cache row by row) or outputs is never
// materialised; any other is copied into a buffer of its own (copy_rows per part).
bool is_deferred_concat(const ir::Function& fn, const ir::Op& op);
// A log_softmax read only by topk is folded into the topk kernel (log-probabilities out).
bool is_folded_log_softmax(const ir::Function& fn, const ir::Op& op);
// Ops whose results own a fresh buffer: kernels other than the in-place kv ops and folded
// log_softmax, and materialised concats.
bool owns_result_storage(const ir::Function& fn, const ir::Op& op);

// Persistent caches: the target's "kv.L" (max_context rows) and the drafter's context K/V
// "dk.L" / "dv.L" (max_context + draft_rows: a propose appends its block after the longest
// context). Their pending-row counterparts in a commit: "kv_step.L", "dk_step.L", "dv_step.L".
bool is_cache_arg(const std::string& name);
bool is_pending_arg(const std::string& name);
int64_t cache_rows(const std::string& name, int64_t max_context, int64_t draft_rows);

// Views of every value of `fn` at `tokens`; cache arguments span cache_rows. A root in `stored`
// (storage-dtypes) is stored in that dtype, and so are its views. Throws kplan::Error naming the
// op for a reshape of a strided view.
std::map<const ir::Value*, View> compute_views(const ir::Function& fn, int64_t tokens, int64_t max_context,
                                               int64_t draft_rows = 0,
                                               const std::map<const ir::Value*, DType>* stored = nullptr);

// A whole bf16 [N, K] weight (a Weight op's result, contiguous, not a stack): what the dense
// templates' row stream reads.
bool is_whole_bf16_matrix(const View& w);

// `v`'s view in `views`, or null when it has none (the fusion finders' lookup).
const View* find_view(const std::map<const ir::Value*, View>& views, const ir::Value* v);

// "op 12 (rms_norm) of @target": how errors name an op.
std::string op_label(const ir::Function& fn, int64_t index, const ir::Op& op);

}  // namespace kplan::passes
