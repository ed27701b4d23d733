// weight-layout: the plan's weights table. Every weight any function of the module names
// (@target, @target_commit, the drafter's), under (source = the op's ckpt, name): weight ops as
// the checkpoint stores them, weight_stack ops as the stacked experts the kernels read (layout
// "stacked", name with '*'). The INT4 routed experts the tensor-core kernels read in
// ir/support/int4_frag.h's order (heuristics' moe_int4_layout) are recorded as "int4_frag" (the
// packed words) and "int4_frag_scales": their bytes in the plan stay the checkpoint's stacked
// rows (the CPU reference reads them so), and the GPU runtime lays them out at load.
// Without weight bytes (--no-weights) the entries carry names, dtypes and shapes only.
#include "compiler/passes/weight_layout.h"

#include <set>
#include <utility>

#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/lowering_views.h"
#include "ir/support/int4_frag.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

plan::Weight make_weight(const ir::Op& op, const std::string& source, const WeightBytes& bytes_of) {
  const std::string name = op.attrs().get_string("name");
  plan::Weight w;
  w.name = name;
  w.source = source;
  w.dtype = op.result()->type().dtype;
  w.shape = eval_shape(op.result()->type(), 0);
  const uint64_t bytes = dtype_size(w.dtype) * product(w.shape);
  if (op.kind() == ir::OpKind::WeightStack) w.layout = "stacked";
  w.size = bytes;  // the writer sets it again; validate_plan reads it before writing too
  if (!bytes_of) return w;
  if (op.kind() == ir::OpKind::Weight) {
    w.view = bytes_of(source, name);
  } else {  // the checkpoint's per-expert tensors, stacked
    const size_t star = name.find('*');
    for (int64_t e = 0; e < op.attrs().get_int("count"); ++e) {
      const std::span<const uint8_t> part = bytes_of(source, name.substr(0, star) + std::to_string(e) + name.substr(star + 1));
      w.owned.insert(w.owned.end(), part.begin(), part.end());
    }
  }
  if (w.data().size() != bytes) {
    throw Error("codegen: weight " + name + " (" + source + ") holds " + std::to_string(w.data().size()) +
                " bytes, its IR type " + op.result()->type().str() + " needs " + std::to_string(bytes));
  }
  return w;
}

// The device layouts of moe_experts_int4's stacked weights (operands 3..8: gate, its scales, up,
// its scales, down, its scales; words int32 [E, rows, K / 8], scales [E, rows, K / 32]).
void mark_int4_frag(const std::vector<const ir::Function*>& functions, LowerState& s) {
  for (const ir::Function* fn : functions) {
    for (const ir::Op* op : fn->ops()) {
      if (op->kind() != ir::OpKind::MoeExpertsInt4) continue;
      const std::vector<int64_t> gate = eval_shape(op->operand(3)->type(), 0);
      if (codegen::moe_int4_layout(8 * gate[2], gate[1]) != 1) continue;
      for (int i = 3; i <= 8; ++i) {
        const ir::Op* w = op->operand(i)->defining_op();
        if (!w || w->kind() != ir::OpKind::WeightStack) continue;
        const std::string source = w->attrs().has("ckpt") ? w->attrs().get_string("ckpt") : "target";
        const auto it = s.weight_index.find({source, w->attrs().get_string("name")});
        if (it != s.weight_index.end()) s.weights[it->second].layout = i % 2 == 1 ? int4_frag::kWordsLayout : int4_frag::kScalesLayout;
      }
    }
  }
}

}  // namespace

void add_function_weights(const std::vector<const ir::Function*>& functions, const WeightBytes& bytes,
                          std::vector<plan::Weight>& weights) {
  std::set<std::pair<std::string, std::string>> have;
  for (const plan::Weight& w : weights) have.emplace(w.source, w.name);
  for (const ir::Function* fn : functions) {
    for (const ir::Op* op : fn->ops()) {
      if (op->kind() != ir::OpKind::Weight && op->kind() != ir::OpKind::WeightStack) continue;
      const std::string source = op->attrs().has("ckpt") ? op->attrs().get_string("ckpt") : "target";
      if (!have.emplace(source, op->attrs().get_string("name")).second) continue;
      weights.push_back(make_weight(*op, source, bytes));
    }
  }
}

void weight_layout(LowerState& s) {
  s.weights.clear();
  s.weight_index.clear();
  std::vector<const ir::Function*> functions = s.programs;
  if (s.module) {
    const std::vector<ir::Function*> all = s.module->functions();
    functions.assign(all.begin(), all.end());
  }
  add_function_weights(functions, s.weight_bytes, s.weights);
  for (size_t i = 0; i < s.weights.size(); ++i)
    s.weight_index[std::make_pair(s.weights[i].source, s.weights[i].name)] = static_cast<uint32_t>(i);
  mark_int4_frag(functions, s);
}

}  // namespace kplan::passes
