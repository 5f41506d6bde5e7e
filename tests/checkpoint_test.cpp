// Checkpoints: save -> load gives identical logits; manifest catches corruption; names and shapes checked.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint/checkpoint.h"
#include "test_util.h"
#include "train/optimizer.h"
#include "util/errors.h"

namespace lm::test {

namespace {
model::GptConfig tiny(bool tied = true) { return tiny_config(128, tied); }

fs::path save_tiny(const fs::path& run, model::Gpt& m, int64_t step) {
  train::TrainConfig tc;
  auto opt = train::make_adamw(train::split_decay_groups(*m), tc);
  checkpoint::SaveRequest req;
  req.model = m.get();
  req.optimizer = opt.get();
  req.state.step = step;
  req.config_yaml = "run: {dir: x}\n";
  req.tokenizer_model = english_tokenizer_path();
  return checkpoint::save_checkpoint(run, checkpoint::step_name(step), req);
}
}  // namespace

TEST(Checkpoint, SaveThenLoadGivesIdenticalLogits) {
  ScratchDir run("ck");
  for (bool tied : {true, false}) {
    torch::manual_seed(10);
    model::Gpt m(tiny(tied));
    fs::path dir = save_tiny(run.path(), m, tied ? 5 : 6);
    auto loaded = checkpoint::load_checkpoint(dir);
    EXPECT_EQ(loaded.arch, m->config());
    EXPECT_EQ(loaded.state.step, tied ? 5 : 6);
    auto x = torch::randint(0, 128, {2, 8}, torch::kInt64);
    m->eval();
    loaded.model->eval();
    EXPECT_TRUE(torch::equal(m->forward(x), loaded.model->forward(x)));
  }
  EXPECT_EQ(checkpoint::resolve_checkpoint(run.path()), run / "step_00000006");
  for (auto& e : fs::directory_iterator(run.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "temp dir left: " << e.path();
  }
}

TEST(Checkpoint, CorruptionIsDetectedByTheManifest) {
  ScratchDir run("ckbad");
  torch::manual_seed(11);
  model::Gpt m(tiny());
  fs::path dir = save_tiny(run.path(), m, 1);
  EXPECT_NO_THROW(checkpoint::verify_checkpoint(dir));
  {
    std::fstream f(dir / "model.pt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  EXPECT_THROW(checkpoint::verify_checkpoint(dir), CheckpointError);
  std::ofstream(dir / "manifest.json") << "[1, 2]";  // valid JSON, wrong shape
  EXPECT_THROW(checkpoint::verify_checkpoint(dir), CheckpointError);
  fs::remove(dir / "manifest.json");
  EXPECT_THROW(checkpoint::load_checkpoint(dir), CheckpointError);
}

TEST(Checkpoint, WeightsWithWrongShapeOrNamesAreRejectedBeforeCopying) {
  ScratchDir run("ckshape");
  torch::manual_seed(12);
  model::Gpt small(tiny());
  fs::path dir = save_tiny(run.path(), small, 1);
  auto wide_cfg = tiny();
  wide_cfg.d_model = 32;
  model::Gpt wide(wide_cfg);
  auto before = wide->tok_emb->weight.clone();
  try {
    checkpoint::load_weights(*wide, dir / "model.pt");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("tok_emb.weight"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(torch::equal(before, wide->tok_emb->weight));
  model::Gpt untied(tiny(false));
  EXPECT_THROW(checkpoint::load_weights(*untied, dir / "model.pt"), CheckpointError);
}

TEST(Checkpoint, PruneKeepsTheNewest) {
  ScratchDir run("ckprune");
  torch::manual_seed(13);
  model::Gpt m(tiny());
  for (int64_t s : {1, 2, 3, 4}) save_tiny(run.path(), m, s);
  checkpoint::prune_checkpoints(run.path(), 2);
  EXPECT_FALSE(fs::exists(run / "step_00000002"));
  EXPECT_TRUE(fs::exists(run / "step_00000003"));
  EXPECT_TRUE(fs::exists(run / "step_00000004"));
}

}  // namespace lm::test
