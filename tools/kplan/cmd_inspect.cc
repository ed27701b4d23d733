// kplan inspect: not implemented yet (its issue has not landed).
#include "ir/error.h"
#include "tools/kplan/commands.h"

namespace kplan::cli {

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "(not yet implemented)");
  cmd->allow_extras();
  cmd->callback([] { throw Error("kplan inspect: not yet implemented"); });
}

}  // namespace kplan::cli
