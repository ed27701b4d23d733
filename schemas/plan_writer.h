#pragma once
// Writes a Plan as a .kplan file: the 64-byte prefix, the FlatBuffer with every table but the
// weight bytes, then the page-aligned weights data section (plan_file_format.h).
#include <filesystem>

#include "schemas/plan_model.h"

namespace kplan::plan {

// Validates the plan, places each weight in the data section (kWeightAlignment apart) and
// checksums it -- filling Weight::offset, size and checksum in `plan` -- then writes the file
// through a temporary name and an atomic rename. Weight bytes are streamed, one weight at a time.
// Throws kplan::Error naming the file on failure.
void write_plan(Plan& plan, const std::filesystem::path& path);

}  // namespace kplan::plan
