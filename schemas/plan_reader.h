#pragma once
// Reads a .kplan file by mmap: checks the prefix (magic, format version, checksums, sizes), runs
// the FlatBuffers verifier, checks every weight's checksum, and returns the Plan with each
// Weight::view pointing into the mapping (kept alive by Plan::backing), so weights are uploaded
// straight from the page cache without a copy. Every refusal is one kplan::Error line naming the
// file and the problem ("damaged plan: ...", "not a kplan plan", "newer format version").
#include <cstdint>
#include <filesystem>
#include <functional>

#include "schemas/plan_model.h"

namespace kplan::plan {

struct ReadOptions {
  // Hash every weight's bytes against the checksum in the table (reads the whole data section).
  bool verify_weights = true;
  // While verifying: called with the weight bytes hashed so far and their total, at the start
  // (0, total), then after every chunk of kVerifyChunkBytes (or smaller weight) hashed.
  std::function<void(uint64_t done, uint64_t total)> on_progress{};
};

// Weights are hashed and reported in chunks of this many bytes (progress without a call per byte).
inline constexpr size_t kVerifyChunkBytes = size_t{8} << 20;

Plan read_plan(const std::filesystem::path& path, const ReadOptions& options = {});

}  // namespace kplan::plan
