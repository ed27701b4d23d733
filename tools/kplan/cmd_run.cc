// kplan run: not implemented yet (its issue has not landed).
#include "ir/error.h"
#include "tools/kplan/commands.h"

namespace kplan::cli {

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "(not yet implemented)");
  cmd->allow_extras();
  cmd->callback([] { throw Error("kplan run: not yet implemented"); });
}

}  // namespace kplan::cli
