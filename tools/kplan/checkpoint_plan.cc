#include "tools/kplan/checkpoint_plan.h"

#include <fstream>
#include <iterator>

#include "compiler/frontend/checkpoint.h"
#include "runtime/tokenizer/tokenizer_bundle.h"

namespace kplan::cli {
namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

std::shared_ptr<const plan::Plan> checkpoint_plan(const std::filesystem::path& dir,
                                                  const std::optional<std::filesystem::path>& draft_dir) {
  auto target = std::make_shared<TargetCheckpoint>(TargetCheckpoint::open(dir));
  auto p = std::make_shared<plan::Plan>();
  p->header.compiler_version = "checkpoint";
  p->model = target->config();
  p->model_config_json = read_text(target->dir() / "config.json");
  p->header.limits.max_context = p->model.max_position_embeddings;
  if (tokenizer::has_tokenizer_files(dir)) p->tokenizer = tokenizer::bundle_tokenizer_files(dir);
  for (const TensorSpec& spec : target->specs()) {
    const TensorView& t = target->weights().get(spec.name);
    plan::Weight w;
    w.name = t.name;
    w.dtype = t.dtype;
    w.shape = t.shape;
    w.view = t.bytes;
    w.size = t.bytes.size();
    p->weights.push_back(std::move(w));
  }
  if (draft_dir) {
    const DraftCheckpoint draft = DraftCheckpoint::open(*draft_dir, WeightsMode::None);
    check_draft_fits_target(draft.config(), p->model);
    p->draft = draft.config();
    p->draft_config_json = read_text(draft.dir() / "config.json");
    // The drafter's tensors join the plan with the plan-based drafter (runtime/session_drafter.h).
  }
  p->backing = target;  // keeps the mapped shards behind the weight views alive
  return p;
}

}  // namespace kplan::cli
