#include "compiler/passes/add_norm.h"

#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/program_order.h"

namespace kplan::passes {

using ir::Op;
using ir::OpKind;
using ir::Value;

namespace {

// Contiguous f32 or bf16 rows of `shape` ([T, H]).
bool rows_of_shape(const View* v, const std::vector<int64_t>& shape) {
  return v && is_contiguous(*v) && v->shape == shape && (v->dtype == DType::F32 || v->dtype == DType::BF16);
}

}  // namespace

void find_add_norms(const ir::Function& fn, const std::map<const Value*, View>& views, const EpilogueFusions& epilogue,
                    const NormMatmuls& norms, const EmbeddingNorms& gathers, AddNorms& out) {
  const ProgramOrder order(fn);
  const std::vector<ir::Op*> ops = fn.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op* add = ops[i];
    if (add->kind() != OpKind::Add || add->num_operands() != 2 || add->operand(0) == add->operand(1) || epilogue.fused_adds.count(add))
      continue;
    const View* sum = find_view(views, add->result());
    if (!sum || !sum->root || sum->shape.size() != 2 || !rows_of_shape(sum, sum->shape)) continue;
    if (!rows_of_shape(find_view(views, add->operand(0)), sum->shape) || !rows_of_shape(find_view(views, add->operand(1)), sum->shape))
      continue;
    // The norm: the first op after the add that launches a kernel (nothing between them can write
    // the add's operands), and the sum's first reader.
    const size_t next = next_launching_op(ops, i);
    if (next == ops.size()) continue;
    const Op* norm = ops[next];
    auto readers = order.readers.find(add->result());
    if (readers == order.readers.end() || readers->second.front() != norm) continue;
    if (norm->kind() != OpKind::RmsNorm || norm->num_operands() != 2 || norm->operand(0) != add->result() || norms.absorbed.count(norm) ||
        gathers.gather_of.count(norm))
      continue;
    const View* weight = find_view(views, norm->operand(1));
    if (!weight || weight->dtype != DType::BF16 || !is_contiguous(*weight) || weight->shape != std::vector<int64_t>{sum->shape[1]}) continue;
    if (!rows_of_shape(find_view(views, norm->result()), sum->shape)) continue;
    out.add_of[norm] = add;
    out.absorbed[add] = norm;
  }
}

bool add_norms_enabled() { return codegen::compile_switch("KPLAN_FUSE_ADD_NORM", true); }

}  // namespace kplan::passes
