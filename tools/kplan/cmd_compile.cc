// kplan compile: not implemented yet (its issue has not landed).
#include "ir/error.h"
#include "tools/kplan/commands.h"

namespace kplan::cli {

void register_compile(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "(not yet implemented)");
  cmd->allow_extras();
  cmd->callback([] { throw Error("kplan compile: not yet implemented"); });
}

}  // namespace kplan::cli
