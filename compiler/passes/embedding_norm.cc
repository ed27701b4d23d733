#include "compiler/passes/embedding_norm.h"

#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/program_order.h"

namespace kplan::passes {

using ir::Op;
using ir::OpKind;
using ir::Value;

void find_embedding_norms(const ir::Function& fn, const std::map<const Value*, View>& views, const NormMatmuls& norms,
                          EmbeddingNorms& out) {
  const ProgramOrder order(fn);
  for (const Op* gather : fn.ops()) {
    if (gather->kind() != OpKind::Embedding || gather->num_operands() != 2) continue;
    const View* table = find_view(views, gather->operand(1));
    const View* rows = find_view(views, gather->result());
    if (!table || !is_whole_bf16_matrix(*table) || !rows || !rows->root || !is_contiguous(*rows) || rows->shape.size() != 2 ||
        rows->shape[1] != table->shape[1] || (rows->dtype != DType::F32 && rows->dtype != DType::BF16))
      continue;
    auto readers = order.readers.find(gather->result());
    if (readers == order.readers.end() || readers->second.empty()) continue;
    const Op* norm = readers->second.front();  // readers are in program order
    if (norm->kind() != OpKind::RmsNorm || norm->num_operands() != 2 || norm->operand(0) != gather->result() || norms.absorbed.count(norm))
      continue;
    const View* weight = find_view(views, norm->operand(1));
    const View* y = find_view(views, norm->result());
    if (!weight || weight->dtype != DType::BF16 || !is_contiguous(*weight) || weight->shape.size() != 1 || weight->shape[0] != rows->shape[1])
      continue;
    if (!y || !is_contiguous(*y) || y->shape != rows->shape || (y->dtype != DType::F32 && y->dtype != DType::BF16)) continue;
    out.gather_of[norm] = gather;
    out.absorbed[gather] = norm;
  }
}

// On by default since it ran on a GPU (bench/RESULTS.md 2026-12-07 session 46: GpuOps.EmbeddingNormIsTheGatherThenTheNorm
// and the HF goldens through it passed on an H100; the K2.6 1-token step there within 0.1 us of the
// two launches', one launch fewer); KPLAN_FUSE_EMBED_NORM=0 compiles without it.
bool embedding_norms_enabled() { return codegen::compile_switch("KPLAN_FUSE_EMBED_NORM", true); }

}  // namespace kplan::passes
