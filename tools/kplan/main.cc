// kplan: the one command-line entry point. Subcommands: compile, inspect, run, bench, synth.
#include <cstdio>
#include <exception>

#include "ir/support/error.h"
#include "tools/kplan/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kplan: ahead-of-time compiler and runtime for DeepSeek-V3-class models (MLA + MoE) "
               "with DDTree speculative decoding"};
  app.require_subcommand(1);
  kplan::cli::register_compile(app);
  kplan::cli::register_inspect(app);
  kplan::cli::register_run(app);
  kplan::cli::register_bench(app);
  kplan::cli::register_synth(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kplan::Error& e) {
    std::fprintf(stderr, "kplan: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kplan: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
