#pragma once
// select-kernels' router fusion: a MoE layer's moe_router whose two results (the weights and the
// ids) only its moe_experts read is computed by the experts' gate/up launch
// (kernels_templates/moe_grouped.cuh, ROUTE): every block routes the step's tokens itself, a
// warp a token, before it finds its expert, and one block writes the ids and weights for the
// down projection. The router's launch (a few microseconds of a decode step, latency only) is
// gone; what the blocks repeat is a few hundred sigmoids and TOPK warp argmaxes a token. The IR
// is unchanged (the CPU reference runs the router).
//
// Only where every bucket can take it: the program's largest step routes at most 64 tokens
// (the template's shared-memory ids), the router is ungrouped (n_group 1, as K2.6's; grouped
// routers need a row of shared memory a warp for the group scores) over at most 1024 experts.
#include <map>

#include "compiler/passes/lowering_views.h"
#include "ir/ir.h"

namespace kplan::passes {

//
// Routing in the logits' launch (find_router_logits): such a router whose logits are the first
// sibling of a sibling group with a GLU pair (the router beside its shared expert's gate and up,
// sibling_matmuls.h) is routed by that group's launch at the steps where the group launches
// together (kernels_templates/matmul_siblings.cuh ROUTE_K: its last router block routes, beside
// the shared expert's stream), and the experts' gate/up launch reads the ids there (at the other
// steps it routes itself, as above). A gate/up launch routes 3.9 us of a 1-token MoE layer on an
// H100 (bench/RESULTS.md 2026-12-07 session 47); the group's launch hides most of it (the 1-token
// step 5 us faster in the graph, session 48; KPLAN_ROUTE_IN_LOGITS=0 turns it off). Each such
// router has a persistent zeroed count (plan-memory's "route.N" slot), its results their slots from the
// group's launch on.
struct RouterExperts {
  std::map<const ir::Op*, const ir::Op*> router_of;  // moe_experts(_int4) -> the router its gate/up launch runs
  std::map<const ir::Op*, const ir::Op*> absorbed;   // moe_router -> the experts op that launches it
  std::map<const ir::Op*, const ir::Op*> logits_router;  // a group's first (the logits) -> the router its launch runs
  std::map<const ir::Op*, const ir::Op*> logits_of;      // that router -> the logits' matmul
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes) and its largest step
// `max_tokens`: each moe_router as above whose logits are stored f32 as contiguous rows and whose
// results are stored in their IR dtypes and read by one moe_experts(_int4) op only, as its
// weights and ids operands. Appends to `out`.
void find_router_experts(const ir::Function& fn, const std::map<const ir::Value*, View>& views, int64_t max_tokens, RouterExperts& out);

// The routers of `out` (found above) whose logits' launch can route them, given the sibling
// groups. Adds to out.logits_router / logits_of.
struct SiblingMatmuls;
void find_router_logits(const SiblingMatmuls& siblings, RouterExperts& out);

// The most tokens a gate/up launch routes itself (the template's ROUTE bound).
inline constexpr int64_t kMaxRoutedTokens = 64;

// False when KPLAN_FUSE_ROUTER=0 (a compile without the fusion, for measuring it); another value
// than 0 or 1 is refused.
bool router_experts_enabled();
// False with KPLAN_ROUTE_IN_LOGITS=0 (the gate/up launch then routes at every step; a compile
// without the fold, for measuring it); another value than 0 or 1 is refused.
bool router_logits_enabled();

}  // namespace kplan::passes
