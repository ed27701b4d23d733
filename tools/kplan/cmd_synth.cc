// kplan synth: not implemented yet (its issue has not landed).
#include "ir/error.h"
#include "tools/kplan/commands.h"

namespace kplan::cli {

void register_synth(CLI::App& app) {
  auto* cmd = app.add_subcommand("synth", "(not yet implemented)");
  cmd->allow_extras();
  cmd->callback([] { throw Error("kplan synth: not yet implemented"); });
}

}  // namespace kplan::cli
