#pragma once
// select-kernels' residual fusions: an add whose work the kernel producing one of its operands
// does in its epilogue (y = residual + ...), so the add launches nothing and the operand is
// never stored. A decode step is launch-bound at small token counts (each launch costs the SMs a
// ramp and a tail), and every layer adds twice into the residual stream.
//   - matmul -> add: o_proj, a dense MLP's down projection (and any [N, K] matmul whose result
//     only an add reads): the matmul kernel's ACC epilogue reads the other operand.
//   - moe -> add(routed, shared) -> add(h, .): the shared expert's down projection does both
//     adds and the MoE combine in its epilogue (the matmul's ROUTED: it sums the routed experts'
//     per-pair rows, which the MoE's down kernel leaves in its scratch, then adds its product and
//     h): the MoE launches no combine. With KPLAN_FUSE_COMBINE=0 the combine writes h + routed
//     (its ACC epilogue reading h) and the down projection adds into that in place.
// The IR is unchanged (the CPU reference still runs the adds); the lowered dumps show what was
// fused (`epilogue = %out = %residual + this` on the producer, `fused = the epilogue of %N` on
// the add).
#include <map>
#include <set>

#include "compiler/passes/lowering_views.h"
#include "ir/ir.h"

namespace kplan::passes {

// What a producer's epilogue does: writes `out` = `residual` + its own result. `residual` may
// be `out` itself (the MoE chain's second producer adds into the first one's output in place).
struct EpilogueAdd {
  const ir::Value* residual = nullptr;
  const ir::Value* out = nullptr;
  const ir::Op* routed = nullptr;  // the MoE whose combine this epilogue does (its per-pair rows summed too)
};

struct EpilogueFusions {
  std::map<const ir::Op*, EpilogueAdd> producers;
  std::map<const ir::Op*, const ir::Op*> combined_by;  // MoE -> the shared down projection doing its combine
  std::map<const ir::Op*, const ir::Op*> fused_adds;  // add -> the producer whose epilogue does it
  std::set<const ir::Value*> unstored;                // results only a fused add read: never written
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes): each pattern above
// whose intermediate values have no other reader (an output counts as one), whose residual and
// result are contiguous rows of one shape stored in one dtype, and (the MoE chain) whose routed
// experts run before the shared expert's down projection. Appends to `out`.
void find_epilogue_adds(const ir::Function& fn, const std::map<const ir::Value*, View>& views, EpilogueFusions& out);

// False when KPLAN_FUSE_ADDS=0 (a compile without the fusions, for measuring them); another
// value than 0 or 1 is refused.
bool epilogue_adds_enabled();
// False when KPLAN_FUSE_COMBINE=0: the MoE chain with its own combine launch.
bool combine_in_shared_enabled();

}  // namespace kplan::passes
