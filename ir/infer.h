#pragma once
// Result types of every op from its operand types and attributes (ir/OPS.md). Used by the
// builder to type new ops, by the verifier and by the infer-shapes pass to check declared types.
#include <string>
#include <vector>

#include "ir/attr.h"
#include "ir/op_kind.h"
#include "ir/type.h"

namespace kplan::ir {

// Checks operand count, operand types and attribute presence/kinds, and returns the result
// types. `declared` are the types already on the op (needed for reshape, whose shape is its
// result type; may be empty elsewhere). Throws kplan::Error with a message that does not name
// the op (the caller adds it), e.g. "operand 1 has shape [128], expected [256]".
std::vector<Type> infer_result_types(OpKind kind, const std::vector<Type>& operands,
                                     const Attrs& attrs, const std::vector<Type>& declared);

}  // namespace kplan::ir
