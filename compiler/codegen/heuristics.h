#pragma once
// Tuning choices (block sizes, token tiles) per kernel family, kept apart from the templates and
// from the launch code so the speed work can swap them without touching either.
#include <cstdint>
#include <map>
#include <string>

#include "compiler/codegen/kernel_families.h"

namespace kplan::codegen {

// Fills every tuning parameter of `family` that `params` does not already hold, from the
// problem parameters (dims) in `params`.
void choose_tuning(const FamilySpec& family, std::map<std::string, int64_t>& params);

}  // namespace kplan::codegen
