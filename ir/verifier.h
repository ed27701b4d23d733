#pragma once
// Verifier: every op has the right operand count, attributes and result types (re-inferred from
// its operands), every operand is defined before its use in the same function (dominance in one
// block), names are unique. Diagnostics name the function, the op and the values, e.g.
//   @target: op %12 = rms_norm(%11, %w3): operand 1 has shape [128], expected [256]
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kplan::ir {

// All problems found, one line each (empty when the module is valid).
std::vector<std::string> verify_diagnostics(const Module& m);
// Throws kplan::Error with the first problem (and the count of others) when invalid.
void verify(const Module& m);

}  // namespace kplan::ir
