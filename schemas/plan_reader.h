#pragma once
// Reads a .kplan file by mmap: checks the prefix (magic, format version, checksums, sizes), runs
// the FlatBuffers verifier, checks every weight's checksum, and returns the Plan with each
// Weight::view pointing into the mapping (kept alive by Plan::backing), so weights are uploaded
// straight from the page cache without a copy. Every refusal is one kplan::Error line naming the
// file and the problem ("damaged plan: ...", "not a kplan plan", "newer format version").
#include <filesystem>

#include "schemas/plan_model.h"

namespace kplan::plan {

struct ReadOptions {
  // Hash every weight's bytes against the checksum in the table (reads the whole data section).
  bool verify_weights = true;
};

Plan read_plan(const std::filesystem::path& path, const ReadOptions& options = {});

}  // namespace kplan::plan
