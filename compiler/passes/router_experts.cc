#include "compiler/passes/router_experts.h"

#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/program_order.h"
#include "compiler/passes/sibling_matmuls.h"

namespace kplan::passes {

using ir::Op;
using ir::OpKind;
using ir::Value;

void find_router_experts(const ir::Function& fn, const std::map<const Value*, View>& views, int64_t max_tokens, RouterExperts& out) {
  if (max_tokens > kMaxRoutedTokens) return;
  const ProgramOrder order(fn);
  for (const Op* router : fn.ops()) {
    if (router->kind() != OpKind::MoeRouter || router->num_operands() != 2 || router->num_results() != 2) continue;
    if (router->attrs().get_int("n_group") != 1) continue;
    const View* logits = find_view(views, router->operand(0));
    const View* bias = find_view(views, router->operand(1));
    const View* weights = find_view(views, router->result(0));
    const View* ids = find_view(views, router->result(1));
    if (!logits || !is_contiguous(*logits) || logits->dtype != DType::F32 || logits->shape.size() != 2 || logits->shape[1] > 1024) continue;
    if (!bias || !is_contiguous(*bias) || bias->dtype != DType::F32) continue;
    if (!weights || !ids || !is_contiguous(*weights) || !is_contiguous(*ids) || weights->dtype != DType::F32 || ids->dtype != DType::I32)
      continue;
    // Both results read by one experts op, as its weights (operand 1) and ids (operand 2).
    const Op* experts = nullptr;
    bool only = true;
    for (const Value* r : {router->result(0), router->result(1)}) {
      auto readers = order.readers.find(r);
      if (readers == order.readers.end()) {
        only = false;
        continue;
      }
      for (const Op* reader : readers->second) {
        if (experts && reader != experts) only = false;
        experts = reader;
      }
    }
    if (!only || !experts || (experts->kind() != OpKind::MoeExperts && experts->kind() != OpKind::MoeExpertsInt4)) continue;
    if (experts->operand(1) != router->result(0) || experts->operand(2) != router->result(1)) continue;
    out.router_of[experts] = router;
    out.absorbed[router] = experts;
  }
}

void find_router_logits(const SiblingMatmuls& siblings, RouterExperts& out) {
  for (const auto& [router, experts] : out.absorbed) {
    const Op* logits = router->operand(0)->defining_op();
    // The group's first member with a GLU pair after it (the template's ROUTE_K takes YA_F32 + GLU).
    if (!logits || !siblings.later.count(logits) || !siblings.glu.count(logits) || logits->result() != router->operand(0)) continue;
    out.logits_router[logits] = router;
    out.logits_of[router] = logits;
  }
}

bool router_experts_enabled() { return codegen::compile_switch("KPLAN_FUSE_ROUTER", true); }

// On by default since it ran on a GPU (session 48: the goldens either way, the 1-token step 5 us
// faster in the graph on the H100).
bool router_logits_enabled() { return codegen::compile_switch("KPLAN_ROUTE_IN_LOGITS", true); }

}  // namespace kplan::passes
