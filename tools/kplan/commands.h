#pragma once
// Each `kplan` subcommand lives in its own cmd_<name>.cc and registers itself on the app.
// A subcommand's callback throws kplan::Error for user-facing failures; main() prints it as one
// line ("kplan <cmd>: error: ...") and exits 1.
#include <CLI/CLI.hpp>

namespace kplan::cli {

void register_compile(CLI::App& app);
void register_inspect(CLI::App& app);
void register_run(CLI::App& app);
void register_bench(CLI::App& app);
void register_synth(CLI::App& app);

}  // namespace kplan::cli
