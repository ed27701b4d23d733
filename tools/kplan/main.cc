// kplan: the one command-line entry point. Subcommands: compile, inspect, run, bench, synth,
// serve, version, chat.
//
// Exit status: 0 success; 1 an error the command reports (bad data, a failed decode: one line,
// "kplan: error: ..."); 2 a usage error (CLI11's parse errors in the same one-line form, with the
// subcommand's --help named); 3 an internal error (a bug: please report it).
#include <cstdio>
#include <exception>
#include <string>

#include "ir/support/error.h"
#include "tools/kplan/commands.h"

namespace {

// "kplan run" for the deepest subcommand the parse reached, "kplan" when none.
std::string command_path(const CLI::App& app) {
  std::string path = "kplan";
  const CLI::App* at = &app;
  for (;;) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) break;
    at = subs.front();
    path += " " + at->get_name();
  }
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kplan: ahead-of-time compiler and runtime for DeepSeek-V3-class models (MLA + MoE) "
               "with DDTree speculative decoding"};
  app.name("kplan");
  // Every option's default shows in --help (an option whose default is "none" or chosen at run
  // time says so in its description).
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { std::string t = kplan::cli::version_text(); t.pop_back(); return t; },
                       "Print kplan's version, the CUDA toolkit and NVRTC it was built with, the archs it has "
                       "kernel tuning for, and the GPU driver found (if any)");
  kplan::cli::register_compile(app);
  kplan::cli::register_inspect(app);
  kplan::cli::register_run(app);
  kplan::cli::register_bench(app);
  kplan::cli::register_synth(app);
  kplan::cli::register_soak(app);
  kplan::cli::register_version(app);
  kplan::cli::register_serve(app);
  kplan::cli::register_chat(app);
  try {
    // An unknown word where the command goes: CLI11 would say "A subcommand is required".
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || (argc > 1 && sub->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !known) {
      std::fprintf(stderr, "kplan: error: unknown command '%s' (commands: %s; see 'kplan --help')\n", argv[1],
                   names.c_str());
      return kplan::cli::kExitUsage;
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string what = e.what();
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    const std::string path = command_path(app);
    std::fprintf(stderr, "kplan: error: %s (see '%s --help')\n", what.c_str(), path.c_str());
    return kplan::cli::kExitUsage;
  } catch (const kplan::cli::UsageError& e) {
    std::fprintf(stderr, "kplan: error: %s\n", e.what());
    return kplan::cli::kExitUsage;
  } catch (const kplan::Error& e) {
    std::fprintf(stderr, "kplan: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kplan: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
