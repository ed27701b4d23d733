#pragma once
// Parses the IR text form back into a Module. Syntax errors throw kplan::Error naming
// `source`, the line and column, e.g. "in.kir:12:7: unknown op 'rms_nrm'". The result is not
// verified; call ir::verify for types and dominance.
#include <memory>
#include <string>
#include <string_view>

#include "ir/ir.h"

namespace kplan::ir {

std::unique_ptr<Module> parse_module(std::string_view text, const std::string& source = "<input>");

}  // namespace kplan::ir
