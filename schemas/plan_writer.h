#pragma once
// Writes a Plan as a .kplan file: the 64-byte prefix, the FlatBuffer with every table but the
// weight bytes, then the page-aligned weights data section (plan_file_format.h).
#include <cstdint>
#include <filesystem>
#include <functional>

#include "schemas/plan_model.h"

namespace kplan::plan {

// Validates the plan, places each weight in the data section (kWeightAlignment apart) and
// checksums it -- filling Weight::offset, size and checksum in `plan` -- then writes the file
// through a temporary name and an atomic rename. Weight bytes are streamed, one weight at a time.
// Throws kplan::Error naming the file on failure.
// `on_progress` (may be empty) follows the two passes over the weight bytes: step "hashing" (the
// checksums), then "writing", each with (0, total) first and then after every chunk of at most
// kWriteChunkBytes.
using WriteProgress = std::function<void(const char* step, uint64_t done, uint64_t total)>;
inline constexpr size_t kWriteChunkBytes = size_t{8} << 20;
void write_plan(Plan& plan, const std::filesystem::path& path, const WriteProgress& on_progress = {});

}  // namespace kplan::plan
