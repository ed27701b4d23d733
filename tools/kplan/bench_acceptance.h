#pragma once
// `kplan bench --acceptance PROMPTS MODEL`: acceptance length and speed of chain DFlash and of
// DDTree at several budgets, at several temperatures, over a file of prompts
// (cmd_bench_acceptance.cc). The options are added to `kplan bench` by cmd_bench.cc.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace kplan::cli {

struct AcceptanceArgs {
  std::string prompts_file;  // --acceptance PROMPTS
  std::string draft_dir;
  std::string budgets = "4,8,16,32,64";
  std::string temperatures = "0,0.7";
  int64_t max_new = 64;
  std::string device = "auto";
  std::string drafter = "dflash";
  uint64_t seed = 0;
  bool ignore_eos = false;
};

// Adds --acceptance and the options only it takes to `bench`; returns the option and the args
// they fill. `gpu_only` lists the GPU bench's options, which --acceptance excludes.
struct AcceptanceOptions {
  CLI::Option* acceptance;
  std::shared_ptr<AcceptanceArgs> args;
};
AcceptanceOptions add_acceptance_options(CLI::App* bench, const std::vector<CLI::Option*>& gpu_only);

// MODEL: a checkpoint directory or a .kplan plan; json_out: "" or the file for the figures.
void run_acceptance_bench(const AcceptanceArgs& args, const std::string& model, const std::string& json_out);

}  // namespace kplan::cli
