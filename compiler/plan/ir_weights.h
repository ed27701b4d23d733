#pragma once
// Every weight the functions of a module name, as plan weights: what a plan must carry so the CPU
// reference can run its IR (the contract: each (source, name) of every weight / weight_stack op
// of every function, target and draft; stacked experts under the weight_stack name with '*').
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "schemas/plan_model.h"

namespace kplan::plan {

// The bytes of a checkpoint tensor by (source, name): source is the weight op's `ckpt`
// ("target", "draft"). Throws kplan::Error naming the tensor when absent.
using CheckpointBytes = std::function<std::span<const uint8_t>(const std::string& source, const std::string& name)>;

// Appends to `weights` one entry per (source, name) the module's weight ops name that it does
// not hold yet, in op order: a weight op as a view of its checkpoint bytes ("row_major"), a
// weight_stack op as its experts' bytes stacked ("stacked", owned). The dtype and shape are the
// op's IR type; bytes of another size are refused naming the weight.
void add_ir_weights(const ir::Module& module, const CheckpointBytes& bytes, std::vector<Weight>& weights);

}  // namespace kplan::plan
