#pragma once
// The kplan binary (KPLAN_BINARY) run as a user runs it, for the CLI tests of every area: its exit
// status, stdout and stderr; and the synthetic tiny target + DFlash drafter made through
// `kplan synth`, the stand-in pair of the run and bench tests.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/test_support.h"

namespace kplan::test {

struct CliResult {
  int status = -1;  // exit status; -1 when killed by a signal
  std::string out, err;
};

// `kplan ARGS` (ARGS as a shell would split them); stdout and stderr go through files in `scratch`.
inline CliResult run_kplan(const std::string& args, const std::filesystem::path& scratch) {
  const std::filesystem::path out = scratch / "cli.out", err = scratch / "cli.err";
  const std::string cmd = std::string(KPLAN_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = testing_util::read_file(out);
  r.err = testing_util::read_file(err);
  return r;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Whitespace-separated fields of a line.
inline std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  for (std::string f; in >> f;) fields.push_back(f);
  return fields;
}

struct SynthPair {
  std::filesystem::path target, draft;
};

// `kplan synth tiny --seed 1 --out DIR/target --draft DIR/draft` (random weights, no tokenizer).
inline SynthPair synth_tiny_pair(const std::filesystem::path& dir) {
  SynthPair pair{dir / "target", dir / "draft"};
  const CliResult r =
      run_kplan("synth tiny --seed 1 --out " + pair.target.string() + " --draft " + pair.draft.string(), dir);
  EXPECT_EQ(r.status, 0) << r.err;
  return pair;
}

}  // namespace kplan::test
