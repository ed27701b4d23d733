// What `kplan synth` writes opens cleanly through the frontend: every preset (bf16 and INT4,
// single file and sharded) and its drafter pass tensor validation, and INT4 experts dequantise.
#include <gtest/gtest.h>

#include "compiler/frontend/checkpoint.h"
#include "compiler/frontend/weights_fp32.h"
#include "compiler/synth/synth.h"
#include "test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

TEST(SynthCheckpointOpen, EveryPresetAndDrafterValidates) {
  for (const std::string& name : preset_names()) {
    for (bool int4 : {false, true}) {
      SCOPED_TRACE(name + (int4 ? " int4" : ""));
      TempDir dir("synth_" + name);
      ModelConfig c = preset_config(name);
      if (int4) c.quant = k26_int4_quant_config();
      SynthOptions options;
      options.seed = 3;
      options.shard_bytes = int4 ? (uint64_t{1} << 20) : 0;
      synthesize_target(c, dir.path() / "target", options);
      options.shard_bytes = 0;
      synthesize_draft(draft_config_for(c), dir.path() / "draft", options);
      TargetCheckpoint t = TargetCheckpoint::open(dir.path() / "target");
      DraftCheckpoint d = DraftCheckpoint::open(dir.path() / "draft");
      EXPECT_NO_THROW(check_draft_fits_target(d.config(), t.config()));
      EXPECT_EQ(t.config().quant.enabled, int4);
      const int64_t moe_layer = t.config().first_k_dense_replace;
      const std::string expert = "model.layers." + std::to_string(moe_layer) + ".mlp.experts.0.down_proj";
      EXPECT_EQ(linear_is_int4(t.weights(), expert), int4);
      Fp32Tensor w = linear_weight_fp32(t.weights(), expert);
      EXPECT_EQ(w.shape, (std::vector<int64_t>{c.hidden_size, c.moe_intermediate_size}));
      double sum_sq = 0;
      for (float v : w.data) sum_sq += static_cast<double>(v) * v;
      EXPECT_GT(sum_sq, 0.0);  // random weights, not zeros
    }
  }
}

}  // namespace
}  // namespace kplan
