#pragma once
// The IR's text form (ir/OPS.md "Text form"): print(parse(print(m))) == print(m).
#include <string>

#include "ir/ir.h"

namespace kplan::ir {

std::string print_module(const Module& m);
std::string print_function(const Function& fn);
// One op as it appears in its function ("%12 = rms_norm(%11, %3) {eps = 1e-06} : f32[T, 256]"),
// with the function's numbering.
std::string print_op(const Function& fn, const Op& op);
// How a value is referred to in the text: "%tokens" or "%12".
std::string value_ref(const Function& fn, const Value* v);

}  // namespace kplan::ir
