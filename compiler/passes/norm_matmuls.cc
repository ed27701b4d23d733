#include "compiler/passes/norm_matmuls.h"

#include <set>
#include <sstream>
#include <string>

#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/program_order.h"

namespace kplan::passes {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

// A matmul whose launch can read rms_norm(x) in place of x: activations `x` as rows, a whole
// [N, K] bf16 weight (not a view: the templates' 16-byte row stream).
bool reads_as_activations(const Op& op, const Value* x, const std::map<const Value*, View>& views) {
  if ((op.kind() != OpKind::Matmul && op.kind() != OpKind::LmHead) || op.num_operands() < 2 || op.operand(0) != x) return false;
  const View* w = find_view(views, op.operand(1));
  return w && is_whole_bf16_matrix(*w);
}

}  // namespace

void find_norm_matmuls(const ir::Function& fn, const std::map<const Value*, View>& views, const SiblingMatmuls& siblings,
                       NormMatmuls& out, unsigned readers_taken, bool exact) {
  const ProgramOrder order(fn);
  for (const Op* norm : fn.ops()) {
    if (norm->kind() != OpKind::RmsNorm || norm->num_operands() != 2) continue;
    const View* x = find_view(views, norm->operand(0));
    const View* w = find_view(views, norm->operand(1));
    const View* y = find_view(views, norm->result());
    if (!x || !x->root || !as_rows(*x) || (x->dtype != DType::F32 && x->dtype != DType::BF16)) continue;
    if (!w || w->dtype != DType::BF16 || !is_contiguous(*w) || w->shape.size() != 1 || w->shape[0] != x->shape.back()) continue;
    if (!y || !is_contiguous(*y) || y->shape.size() != 2) continue;
    auto readers = order.readers.find(norm->result());
    if (readers == order.readers.end() || readers->second.empty()) continue;
    const Op* first = readers->second.front();  // readers are in program order
    if (siblings.first.count(first) || !reads_as_activations(*first, norm->result(), views)) continue;
    const NormReader reader = first->kind() == OpKind::LmHead ? NormReader::LmHead
                              : siblings.later.count(first)   ? NormReader::Siblings
                                                              : NormReader::Matmul;
    if (!(readers_taken & reader)) continue;
    // The launch's own members; any other reader needs the norm's result stored.
    std::set<const Op*> members = {first};
    auto later = siblings.later.find(first);
    if (later != siblings.later.end()) members.insert(later->second.begin(), later->second.end());
    bool others = false;
    for (const Op* r : readers->second) others = others || !members.count(r);
    if (others && y->dtype != x->dtype) continue;
    if (exact && (others || y->dtype != DType::BF16)) continue;  // NORM 3 stores nothing, rounds to bf16
    out.consumers[first] = {norm, others, exact};
    out.absorbed[norm] = first;
  }
}

// The summed-in folds are off by default: on the H200 the K2.6 slice's 1-token step took 1.2397
// ms with the norms in their matmuls' launches (and the combine and router folds) against 1.2261
// with none of the three, each NORM matmul ~1 us slower between events while the norm launches it
// replaced cost little under PDL (bench/RESULTS.md 2026-12-05 11:59); q_a's in q_b alone was 2.3
// us faster (H200, session 45) but its unrounded rows moved a tiny golden's routing across a
// near-tie (session 46). The exact fold keeps the norm's rounding, so results stay the norm
// launch's bit for bit.
NormFolds norm_folds() {
  const char* env = std::getenv("KPLAN_FUSE_NORM");
  if (!env || std::string_view(env) == "exact") return {NormReader::Matmul, true};
  if (std::string_view(env) == "0") return {};
  if (std::string_view(env) == "1") return {NormReader::AnyReader, false};
  unsigned mask = 0;
  std::stringstream list(env);
  for (std::string item; std::getline(list, item, ',');) {
    if (item == "lm_head") mask |= NormReader::LmHead;
    else if (item == "siblings") mask |= NormReader::Siblings;
    else if (item == "matmul") mask |= NormReader::Matmul;
    else throw Error("KPLAN_FUSE_NORM must be exact, 0, 1 or a comma list of lm_head, siblings, matmul, not '" + std::string(env) + "'");
  }
  return {mask, false};
}

}  // namespace kplan::passes
