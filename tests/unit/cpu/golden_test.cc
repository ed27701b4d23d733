// The CPU backend against HuggingFace transformers: every tests/data/goldens/*.json (made by
// tools/device/make_goldens.py on the GPU machine) names the `kplan synth` arguments of its
// checkpoint; the test re-synthesises it, checks the files' sha256, and compares logits,
// greedy continuations, hidden states and the drafter's logits (||ours - ref|| / ||ref|| per
// row; token ids identical). No golden files at all is a failure. Each case runs through both
// doors of the CPU reference: the checkpoint's in-memory reference plan, and a .kplan file
// written by `kplan compile -o` and read back (its own IR and weights); the two agree bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/synth/synth.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/dflash_drafter.h"
#include "runtime/cpu/rope.h"
#include "runtime/plan_cpu_target.h"
#include "schemas/plan_reader.h"
#include "tests/unit/cpu/cpu_test_util.h"
#include "tests/unit/cpu/sha256.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using cpu_test::causal_step;
using cpu_test::relative_error;

// The issue asks for <= 1e-4. We hold 5e-6: both sides are fp32 with the same math, so what
// remains is rounding (worst seen 1.3e-6), while real semantic slips can be small on these
// models: giving the latent norms rms_norm_eps (as vLLM does) moves tiny2's logits by 1e-5.
constexpr double kRelTol = 5e-6;

std::vector<fs::path> golden_files() {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(KPLAN_TEST_DATA_DIR) / "goldens";
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The `kplan synth` arguments ("tiny --seed 1 --int4", as a list or one string).
struct SynthArgs {
  std::string preset;
  uint64_t seed = 0;
  bool int4 = false;
};

SynthArgs parse_synth_args(const nlohmann::json& j) {
  std::vector<std::string> words;
  if (j.is_string()) {
    std::istringstream in(j.get<std::string>());
    for (std::string w; in >> w;) words.push_back(w);
  } else {
    words = j.get<std::vector<std::string>>();
  }
  SynthArgs a;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--seed" && i + 1 < words.size()) {
      a.seed = std::stoull(words[++i]);
    } else if (words[i] == "--int4") {
      a.int4 = true;
    } else if (words[i].rfind("--", 0) != 0 && a.preset.empty()) {
      a.preset = words[i];
    } else {
      throw std::runtime_error("synth_args: unsupported word '" + words[i] + "'");
    }
  }
  if (a.preset.empty()) throw std::runtime_error("synth_args: no preset");
  return a;
}

Matrix row_matrix(const nlohmann::json& rows) {
  Matrix m(static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.at(0).size()));
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) m.row(r)[c] = rows[r][c].get<float>();
  return m;
}

// The worst relative errors seen in one golden file (printed, so a run shows the margin).
struct Worst {
  double logits = 0, hidden = 0, draft = 0;
};

double track(double err, double& worst) {
  worst = std::max(worst, err);
  return err;
}

// What the loaded transformers model held (RoPE tables, softmax scale, latent-norm eps)
// against the numbers we derive from config.json.
void check_hf_facts(const nlohmann::json& facts, const ModelConfig& c) {
  if (facts.contains("softmax_scale")) {
    EXPECT_NEAR(c.softmax_scale(), facts["softmax_scale"].get<double>(), 1e-12) << "softmax scale";
  }
  const cpu::Rope rope(c.qk_rope_head_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings);
  if (facts.contains("rope_attention_scaling")) {
    EXPECT_NEAR(rope.attention_factor(), facts["rope_attention_scaling"].get<double>(), 1e-7);
  }
  if (facts.contains("rope_inv_freq")) {
    const auto want = facts["rope_inv_freq"].get<std::vector<double>>();
    ASSERT_EQ(want.size(), rope.inv_freq().size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(rope.inv_freq()[i], want[i], 1e-7 * std::abs(want[i]) + 1e-12) << "rope inv_freq " << i;
  }
  // transformers' latent norms use 1e-6 whatever rms_norm_eps is; the IR builder does too.
  for (const char* key : {"kv_a_layernorm_eps", "q_a_layernorm_eps"}) {
    if (facts.contains(key)) {
      EXPECT_EQ(facts[key].get<double>(), 1e-6) << key;
    }
  }
}

// What one CPU model gave on a golden file, kept to compare the two doors bit for bit.
struct Outputs {
  std::vector<std::vector<float>> logits, hidden;  // per prompt: the prefill logits, the captures
  std::vector<std::vector<int32_t>> greedy;        // per prompt
  std::vector<float> draft;                        // the drafter's per-depth logits
};

// Runs the golden's prompts (and its drafter case when `drafter` is given) on `model` and checks
// them against transformers. Hidden states are checked for the golden's layers among `capturable`
// (a written plan's @target returns only the drafter's capture layers).
Outputs check_model(const nlohmann::json& g, TargetModel& model, cpu::CpuDFlashDrafter* drafter,
                    const std::vector<int64_t>& capturable, Worst& worst) {
  Outputs got;
  const int64_t vocab = model.config().vocab_size, hidden = model.config().hidden_size;
  for (const auto& p : g.at("prompts")) {
    const auto ids = p.at("ids").get<std::vector<int32_t>>();
    SCOPED_TRACE("prompt of " + std::to_string(ids.size()) + " tokens");
    std::vector<int64_t> hidden_layers;
    std::vector<size_t> golden_row;  // row of the golden's "hidden" for each captured layer
    const auto want_layers = p.value("hidden_layers", std::vector<int64_t>{});
    for (size_t l = 0; l < want_layers.size(); ++l)
      if (std::find(capturable.begin(), capturable.end(), want_layers[l]) != capturable.end()) {
        hidden_layers.push_back(want_layers[l]);
        golden_row.push_back(l);
      }
    model.reset();
    model.set_capture_layers(hidden_layers);
    StepOutput out = model.forward(causal_step(ids, 0));
    got.logits.push_back(out.logits.data);
    const auto positions = p.at("logits_positions").get<std::vector<int64_t>>();
    Matrix ref = row_matrix(p.at("logits"));
    EXPECT_EQ(ref.cols, vocab);
    for (size_t i = 0; i < positions.size(); ++i)
      EXPECT_LE(track(relative_error(out.logits.row(positions[i]), ref.row(static_cast<int64_t>(i)), vocab), worst.logits), kRelTol)
          << "logits at position " << positions[i];
    if (!hidden_layers.empty()) {
      Matrix ref_hidden = row_matrix(p.at("hidden"));
      const int64_t at = p.at("hidden_position").get<int64_t>();
      for (size_t l = 0; l < hidden_layers.size(); ++l) {
        got.hidden.push_back(out.captured[l].data);
        EXPECT_LE(track(relative_error(out.captured[l].row(at), ref_hidden.row(static_cast<int64_t>(golden_row[l])), hidden), worst.hidden), kRelTol)
            << "output of decoder layer " << hidden_layers[l];
      }
    }
    // Greedy continuation through the KV cache (prefill, then one token per step).
    std::vector<int32_t> all(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) all[i] = static_cast<int32_t>(i);
    model.commit(all);
    std::vector<int32_t> greedy;
    int32_t next = static_cast<int32_t>(cpu::argmax(out.logits.row(out.logits.rows - 1), vocab));
    const int64_t n_new = p.at("greedy_new").get<int64_t>();
    for (int64_t i = 0; i < n_new; ++i) {
      greedy.push_back(next);
      if (i + 1 == n_new) break;
      StepOutput step = model.forward(causal_step({next}, static_cast<int32_t>(model.cache_length())));
      model.commit(std::vector<int32_t>{0});
      next = static_cast<int32_t>(cpu::argmax(step.logits.row(0), vocab));
    }
    EXPECT_EQ(greedy, p.at("greedy_ids").get<std::vector<int32_t>>()) << "greedy continuation";
    got.greedy.push_back(greedy);
  }
  if (!drafter) return got;

  const auto& d = g["draft"];
  const DraftConfig& dc = drafter->config();
  if (d.contains("drafter_rope_inv_freq")) {
    const cpu::Rope rope(dc.head_dim, dc.rope_theta, dc.rope_scaling, dc.max_position_embeddings);
    const auto want = d["drafter_rope_inv_freq"].get<std::vector<double>>();
    EXPECT_EQ(want.size(), rope.inv_freq().size());
    for (size_t i = 0; i < want.size() && i < rope.inv_freq().size(); ++i)
      EXPECT_NEAR(rope.inv_freq()[i], want[i], 1e-7 * std::abs(want[i]) + 1e-12) << "drafter rope inv_freq " << i;
    EXPECT_NEAR(rope.attention_factor(), d.value("drafter_rope_attention_scaling", 1.0), 1e-7);
  }
  const auto ctx = d.at("context_ids").get<std::vector<int32_t>>();
  model.reset();
  model.set_capture_layers(drafter->capture_layers());
  StepOutput out = model.forward(causal_step(ctx, 0));
  const int32_t bonus = d.at("bonus_token").get<int32_t>();
  EXPECT_EQ(cpu::argmax(out.logits.row(out.logits.rows - 1), vocab), bonus) << "drafter bonus token";
  std::vector<int32_t> positions(ctx.size());
  for (size_t i = 0; i < ctx.size(); ++i) positions[i] = static_cast<int32_t>(i);
  drafter->reset();
  drafter->observe(ctx, positions, out.captured);
  Matrix logits = drafter->depth_logits(bonus, d.at("bonus_position").get<int32_t>());
  got.draft = logits.data;
  Matrix ref = row_matrix(d.at("logits"));
  EXPECT_EQ(ref.rows, logits.rows);
  for (int64_t r = 0; r < ref.rows && r < logits.rows; ++r)
    EXPECT_LE(track(relative_error(logits.row(r), ref.row(r), vocab), worst.draft), kRelTol)
        << "drafter depth " << r + 1;
  if (d.contains("argmax")) {
    std::vector<int32_t> ours;
    for (int64_t r = 0; r < logits.rows; ++r) ours.push_back(static_cast<int32_t>(cpu::argmax(logits.row(r), vocab)));
    EXPECT_EQ(ours, d["argmax"].get<std::vector<int32_t>>()) << "drafter argmax per depth";
  }
  return got;
}

// `kplan compile -o` (the real CLI path, kernels for sm_90) into `out`.
void compile_plan(const fs::path& target, const std::optional<fs::path>& draft, const fs::path& out) {
  std::string cmd = std::string(KPLAN_BINARY) + " compile --model " + target.string() +
                    (draft ? " --draft " + draft->string() : "") + " --arch sm_90 -o " + out.string() + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string log;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) log.append(buf, n);
  ASSERT_EQ(::pclose(pipe), 0) << cmd << "\n" << log;
}

void check_golden(const fs::path& file) {
  SCOPED_TRACE(file.filename().string());
  nlohmann::json g;
  std::ifstream(file) >> g;
  const SynthArgs args = parse_synth_args(g.at("synth_args"));
  const testing_util::TempDir temp("cpu_golden_" + g.value("case", std::string("case")));
  const fs::path& root = temp.path();
  ModelConfig config = preset_config(args.preset);
  if (args.int4) config.quant = k26_int4_quant_config();
  SynthOptions options;
  options.seed = args.seed;
  synthesize_target(config, root / "target", options);
  const nlohmann::json target_sha = g.value("checkpoint_sha256", nlohmann::json::object());
  for (const auto& [name, hex] : target_sha.items()) {
    EXPECT_EQ(cpu_test::sha256_file(root / "target" / name), hex.get<std::string>())
        << name << ": the synthesiser no longer reproduces the golden's checkpoint";
  }
  std::optional<fs::path> draft_dir;
  if (g.contains("draft")) {
    const auto& d = g["draft"];
    const SynthArgs dargs = parse_synth_args(d.at("synth_args"));
    SynthOptions doptions;
    doptions.seed = dargs.seed;
    draft_dir = root / "draft";
    synthesize_draft(preset_draft_config(dargs.preset), *draft_dir, doptions);
    const nlohmann::json draft_sha = d.value("checkpoint_sha256", nlohmann::json::object());
    for (const auto& [name, hex] : draft_sha.items()) {
      EXPECT_EQ(cpu_test::sha256_file(*draft_dir / name), hex.get<std::string>())
          << "drafter " << name << ": the synthesiser no longer reproduces the golden's checkpoint";
    }
  }

  // The checkpoint's door: its in-memory reference plan (every layer capturable).
  Worst worst;
  testing_util::ReferenceModel ref = testing_util::reference_model(root / "target", 0, draft_dir);
  check_hf_facts(g.value("hf_facts", nlohmann::json::object()), ref.target->config());
  std::vector<int64_t> every_layer(static_cast<size_t>(config.num_hidden_layers));
  for (size_t l = 0; l < every_layer.size(); ++l) every_layer[l] = static_cast<int64_t>(l);
  const Outputs a = check_model(g, *ref.target, dynamic_cast<cpu::CpuDFlashDrafter*>(ref.drafter.get()),
                                every_layer, worst);

  // A written .kplan file's door: its own IR and weights, read back from disk.
  const fs::path kplan_file = root / "model.kplan";
  compile_plan(root / "target", draft_dir, kplan_file);
  if (::testing::Test::HasFatalFailure()) return;
  auto plan = std::make_shared<const plan::Plan>(plan::read_plan(kplan_file));
  EXPECT_EQ(plan->header.archs, std::vector<std::string>{"sm_90"});
  EXPECT_FALSE(plan->kernels.empty());
  std::unique_ptr<TargetModel> target = make_plan_cpu_target(plan, kplan_file.string(), 0);
  std::unique_ptr<Drafter> drafter;
  if (draft_dir) drafter = make_plan_cpu_drafter(plan, kplan_file.string());
  Worst worst_plan;
  const Outputs b = check_model(g, *target, dynamic_cast<cpu::CpuDFlashDrafter*>(drafter.get()),
                                plan->draft ? plan->draft->target_layer_ids : std::vector<int64_t>{}, worst_plan);

  // Both doors run the same IR on the same weights: the same bits.
  EXPECT_EQ(a.logits, b.logits) << "prefill logits: the plan's IR against the checkpoint's";
  EXPECT_EQ(a.greedy, b.greedy);
  EXPECT_EQ(a.draft, b.draft) << "drafter per-depth logits: the plan's IR against the checkpoint's";
  if (plan->draft) EXPECT_FALSE(b.hidden.empty());
  std::printf("%s: worst relative error: logits %.3g, hidden %.3g, drafter %.3g (from %s: %.3g, %.3g, %.3g)%s\n",
              file.filename().c_str(), worst.logits, worst.hidden, worst.draft, kplan_file.filename().c_str(),
              worst_plan.logits, worst_plan.hidden, worst_plan.draft, draft_dir ? "" : " (no drafter)");
}

TEST(CpuGolden, Sha256KnownAnswer) {
  cpu_test::Sha256 sha;
  sha.update(reinterpret_cast<const uint8_t*>("abc"), 3);
  EXPECT_EQ(sha.hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CpuGolden, EveryGoldenFileMatches) {
  const auto files = golden_files();
  ASSERT_FALSE(files.empty()) << "no golden files in " << KPLAN_TEST_DATA_DIR
                              << "/goldens (tools/device/goldens.sh makes them on the GPU machine)";
  for (const auto& f : files) check_golden(f);
}

}  // namespace
}  // namespace kplan
