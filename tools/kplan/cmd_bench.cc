// kplan bench: not implemented yet (its issue has not landed).
#include "ir/error.h"
#include "tools/kplan/commands.h"

namespace kplan::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not yet implemented)");
  cmd->allow_extras();
  cmd->callback([] { throw Error("kplan bench: not yet implemented"); });
}

}  // namespace kplan::cli
