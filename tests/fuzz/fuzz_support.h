#pragma once
// Shared by the libFuzzer targets of tests/fuzz: a private scratch folder for parsers that read
// files (safetensors, shard indexes, plans), and the one rule every target holds the code to:
// untrusted input either parses or is refused with kplan::Error (the CLI's "kplan: error: ...");
// any other exception would reach the user as "internal error" and is a finding, as are the
// sanitizers' reports, timeouts and allocations past libFuzzer's -malloc_limit_mb.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "ir/support/error.h"

namespace kplan::fuzz {

// A folder of this process's own, removed at exit ($TMPDIR, else /dev/shm when it exists).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string base = std::getenv("TMPDIR") ? std::getenv("TMPDIR")
                       : std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/kplan-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      std::perror("kplan fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "kplan fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A property the target checks failed: report it as a crash with the reason.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "kplan fuzz: FINDING: %s\n", what.c_str());
  std::abort();
}

// Runs `body`; kplan::Error (a refusal naming the problem) is the expected way to say no,
// anything else is a finding. KPLAN_FUZZ_VERBOSE=1 prints each refusal (to see which check a
// crash-corpus input now meets: `KPLAN_FUZZ_VERBOSE=1 build-san/fuzz/fuzz_x corpus/x/crashes/*`).
template <typename F>
void refuse_cleanly(F&& body) {
  static const bool verbose = std::getenv("KPLAN_FUZZ_VERBOSE") != nullptr;
  try {
    body();
  } catch (const kplan::Error& e) {
    if (verbose) std::fprintf(stderr, "kplan fuzz: refused: %.300s\n", e.what());
  } catch (const std::exception& e) {
    finding(std::string("an exception other than kplan::Error (the CLI's \"internal error\"): ") + e.what());
  }
}

}  // namespace kplan::fuzz
