#pragma once
// weight-layout's core, for every maker of a plan (the lowering, and the kernel-less reference
// plan of compiler/driver/reference_plan.h): what a plan must carry so the CPU reference can run
// its IR — each (source, name) of every weight / weight_stack op of the given functions.
#include <vector>

#include "compiler/passes/lower_state.h"

namespace kplan::passes {

// Appends one entry per (source = the op's ckpt, name) that `weights` lacks, in op order: a
// weight op as a view of its checkpoint bytes (layout "row_major"), a weight_stack op as its
// experts' bytes stacked (layout "stacked", owned, name with '*'). The dtype and shape are the
// op's IR type; bytes of another size are refused naming the weight. Without `bytes`
// (--no-weights) the entries carry names, dtypes and shapes only.
void add_function_weights(const std::vector<const ir::Function*>& functions, const WeightBytes& bytes,
                          std::vector<plan::Weight>& weights);

}  // namespace kplan::passes
