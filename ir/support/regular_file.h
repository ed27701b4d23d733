#pragma once
// Input files are untrusted paths: a FIFO blocks an open forever, a device (/dev/zero) never ends
// a read, a symbolic-link loop throws std::filesystem's "Too many levels of symbolic links" as an
// internal error. Every reader of a config, index, shard, tokenizer or plan checks its path here
// first and gets one clear message naming the file.
#include <filesystem>
#include <string>

namespace kplan {

// Throws kplan::Error "<path>: cannot open <what>: does not exist" / ": is a directory" / ": is a
// FIFO, not a regular file" / ": is a device, ..." / ": too many levels of symbolic links" unless
// `path` (after following links) is a regular file.
void require_regular_file(const std::filesystem::path& path, const std::string& what);

// The whole file's bytes, after require_regular_file.
std::string read_regular_file(const std::filesystem::path& path, const std::string& what);

}  // namespace kplan
