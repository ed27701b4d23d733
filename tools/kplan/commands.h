#pragma once
// Each `kplan` subcommand lives in its own cmd_<name>.cc and registers itself on the app.
// A subcommand's callback throws kplan::Error for user-facing failures; main() prints it as one
// line ("kplan: error: ...") and exits 1; a UsageError (a command line that cannot work, found
// after parsing) exits 2, as CLI11's parse errors do.
#include <string>

#include <CLI/CLI.hpp>

#include "ir/support/error.h"

namespace kplan::cli {

inline constexpr int kExitUsage = 2;

struct UsageError : Error {
  using Error::Error;
};

void register_compile(CLI::App& app);
void register_inspect(CLI::App& app);
void register_run(CLI::App& app);
void register_bench(CLI::App& app);
void register_synth(CLI::App& app);
void register_soak(CLI::App& app);     // cmd_soak.cc
void register_version(CLI::App& app);  // cmd_version.cc
void register_serve(CLI::App& app);    // cmd_serve.cc: the OpenAI-compatible HTTP server
void register_chat(CLI::App& app);     // cmd_chat.cc: an interactive conversation in the terminal

// What `kplan --version` and `kplan version` print (several lines, ending in a newline).
std::string version_text();

}  // namespace kplan::cli
