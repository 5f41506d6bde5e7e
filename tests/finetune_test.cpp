// Fine-tuning through the real binary: frozen tensors bit-identical while others move, an untied head
// training under a frozen token table, drift and forgetting reports, contradicting configs rejected.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "test_util.h"

namespace lm::test {

namespace {

// Pretrain 4 steps on tiny_en.txt; returns the run directory.
fs::path pretrain(const ScratchDir& dir, bool tied) {
  RunSpec spec;
  spec.run = "pre";
  spec.seed = 2;
  spec.model += std::string(", tie_embeddings: ") + (tied ? "true" : "false");
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / "pre";
}

// Arguments of a fine-tune on the validation text (new domain), original val = tiny_en_val too.
std::string finetune_args(const ScratchDir& dir, const fs::path& from, const std::string& extra) {
  RunSpec spec;
  spec.run = "ft";
  spec.train_text = "tiny_en_val.txt";
  spec.tokenizer = spec.model = "";  // from the checkpoint
  spec.train = "batch_size: 4, max_steps: 5, warmup_steps: 1, lr: 0.01, eval_every: 0";
  spec.extra = "finetune: {drift_top_k: 3}\n";
  return "finetune --from " + from.string() + " -c " + write_run_config(dir, spec).string() + " " + extra;
}

RunResult finetune(const ScratchDir& dir, const fs::path& from, const std::string& extra) {
  return run_lmtrain(finetune_args(dir, from, extra));
}

torch::Tensor weight(const checkpoint::LoadedCheckpoint& c, const std::string& name) {
  for (auto& [n, t] : model::named_weights(*c.model)) {
    if (n == name) return t;
  }
  ADD_FAILURE() << "no weight " << name;
  return {};
}

}  // namespace

TEST(Finetune, FrozenEmbeddingsStayBitIdenticalWhileTheRestMoves) {
  ScratchDir dir("ft_frozen");
  fs::path pre = pretrain(dir, true);
  auto r = finetune(dir, pre, "--set finetune.freeze_embeddings=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tied head: freezing tok_emb.weight also freezes the output projection"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("frozen tensors unchanged"), std::string::npos) << r.output;
  auto a = checkpoint::load_checkpoint(pre), b = checkpoint::load_checkpoint(dir / "ft");
  EXPECT_TRUE(torch::equal(weight(a, "tok_emb.weight"), weight(b, "tok_emb.weight")));
  EXPECT_FALSE(torch::equal(weight(a, "blocks.0.attn.qkv.weight"), weight(b, "blocks.0.attn.qkv.weight")));
  // drift report: zero for the frozen table; forgetting report: both validation sets
  const std::string drift = slurp(dir / "ft" / "drift.json");
  EXPECT_NE(drift.find("\"max\": 0.0"), std::string::npos) << drift;
  EXPECT_NE(r.output.find("new: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("original: "), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_regular_file(dir / "ft" / "forgetting.json"));
  EXPECT_TRUE(fs::is_regular_file(dir / "ft" / "original_val.bin"));
}

TEST(Finetune, AFrozenFinetuneResumesAndKeepsItsProof) {
  ScratchDir dir("ft_resume");
  fs::path pre = pretrain(dir, true);
  auto r = finetune(dir, pre, "--set finetune.freeze_embeddings=true --set checkpoint.every=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = finetune(dir, pre, "--set finetune.freeze_embeddings=true --set checkpoint.every=2 --resume " +
                             (dir / "ft" / "step_00000002").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("frozen tensors unchanged"), std::string::npos) << r.output;
  const auto first = r.output.find("abandoned branch");
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("abandoned branch", first + 1), std::string::npos) << "one warning names them all: " << r.output;
  EXPECT_NE(r.output.find("step_00000004"), std::string::npos) << r.output;
}

TEST(Finetune, UnfreezeAfterNStepsAndASigtermResumeIsBitwiseExact) {
  ScratchDir dir("ft_unfreeze");
  fs::path pre = pretrain(dir, true);
  const std::string extra = "--set finetune.freeze_embeddings=true --set finetune.unfreeze_embeddings_after=2 "
                            "--set checkpoint.every=1 --set checkpoint.keep_last=10 --set train.log_every=1 ";
  auto straight = finetune(dir, pre, extra + "--set run.dir=" + (dir / "straight").string());
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("step 2: unfroze tok_emb.weight"), std::string::npos) << straight.output;
  auto a = checkpoint::load_checkpoint(pre);
  auto at2 = checkpoint::load_checkpoint(dir / "straight" / checkpoint::step_name(2));
  auto at3 = checkpoint::load_checkpoint(dir / "straight" / checkpoint::step_name(3));
  EXPECT_TRUE(torch::equal(weight(a, "tok_emb.weight"), weight(at2, "tok_emb.weight")));
  EXPECT_FALSE(torch::equal(weight(a, "tok_emb.weight"), weight(at3, "tok_emb.weight")));
  EXPECT_FALSE(torch::equal(weight(a, "blocks.0.mlp.fc.weight"), weight(at2, "blocks.0.mlp.fc.weight")));
  // no AdamW state for the table while it was frozen, state once it trained
  EXPECT_EQ(slurp(dir / "straight" / checkpoint::step_name(2) / "optimizer.pt").find("tok_emb.weight"), std::string::npos);
  EXPECT_NE(slurp(dir / "straight" / checkpoint::step_name(3) / "optimizer.pt").find("tok_emb.weight"), std::string::npos);

  // The same fine-tune stopped by SIGTERM around the unfreeze point, then resumed in a new process.
  const std::string split = extra + "--set run.dir=" + (dir / "split").string();
  pid_t pid = spawn_lmtrain(finetune_args(dir, pre, split), dir / "split1.log", hold_at(dir, "step:2"));
  ASSERT_TRUE(held(dir, "step:2")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  EXPECT_EQ(std::stoll(slurp(dir / "split" / "latest").substr(5)), 2) << "the stop came after the step it was held at";
  auto resumed = finetune(dir, pre, split + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_EQ(losses(dir / "split"), losses(dir / "straight"));
  const fs::path s5 = dir / "straight" / checkpoint::step_name(5), r5 = dir / "split" / checkpoint::step_name(5);
  EXPECT_FALSE(manifest_sha(s5, "model.safetensors").empty());
  EXPECT_EQ(manifest_sha(s5, "model.safetensors"), manifest_sha(r5, "model.safetensors"));
  EXPECT_EQ(manifest_sha(s5, "optimizer.pt"), manifest_sha(r5, "optimizer.pt"));
}

TEST(Finetune, AnUntiedHeadTrainsUnderAFrozenTokenTable) {
  ScratchDir dir("ft_untied");
  fs::path pre = pretrain(dir, false);
  auto r = finetune(dir, pre, "--set finetune.freeze_embeddings=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto a = checkpoint::load_checkpoint(pre), b = checkpoint::load_checkpoint(dir / "ft");
  EXPECT_TRUE(torch::equal(weight(a, "tok_emb.weight"), weight(b, "tok_emb.weight")));
  EXPECT_FALSE(torch::equal(weight(a, "head.weight"), weight(b, "head.weight")));
  EXPECT_NE(r.output.find("drift of head.weight"), std::string::npos) << r.output;
}

TEST(Finetune, UntieHeadLetsTheHeadTrainUnderAFrozenTiedTable) {
  ScratchDir dir("ft_untie");
  fs::path pre = pretrain(dir, true);
  auto r = finetune(dir, pre, "--set finetune.freeze_embeddings=true --set finetune.untie_head=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto a = checkpoint::load_checkpoint(pre), b = checkpoint::load_checkpoint(dir / "ft");
  EXPECT_FALSE(b.arch.tie_embeddings);
  EXPECT_TRUE(torch::equal(weight(a, "tok_emb.weight"), weight(b, "tok_emb.weight")));
  EXPECT_FALSE(torch::equal(weight(a, "tok_emb.weight"), weight(b, "head.weight")));
  EXPECT_NE(r.output.find("drift of head.weight"), std::string::npos) << r.output;
}

TEST(Finetune, EmbeddingLrScaleSlowsTheTokenTable) {
  ScratchDir dir("ft_scale");
  fs::path pre = pretrain(dir, true);
  auto full = finetune(dir, pre, "--set run.dir=" + (dir / "full").string());
  auto slow = finetune(dir, pre, "--set run.dir=" + (dir / "slow").string() + " --set finetune.embedding_lr_scale=0.1");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  EXPECT_NE(slow.output.find("embedding lr scale 0.1"), std::string::npos) << slow.output;
  auto a = checkpoint::load_checkpoint(pre), f = checkpoint::load_checkpoint(dir / "full"), s = checkpoint::load_checkpoint(dir / "slow");
  const double moved_full = (weight(f, "tok_emb.weight") - weight(a, "tok_emb.weight")).norm().item<double>();
  const double moved_slow = (weight(s, "tok_emb.weight") - weight(a, "tok_emb.weight")).norm().item<double>();
  EXPECT_GT(moved_slow, 0.0);
  EXPECT_LT(moved_slow, 0.5 * moved_full) << moved_slow << " vs " << moved_full;
}

TEST(Finetune, UnfrozenEmbeddingsMoveAndDriftMatchesInspect) {
  ScratchDir dir("ft_unfrozen");
  fs::path pre = pretrain(dir, true);
  auto r = finetune(dir, pre, "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto a = checkpoint::load_checkpoint(pre), b = checkpoint::load_checkpoint(dir / "ft");
  const double moved = (weight(a, "tok_emb.weight") - weight(b, "tok_emb.weight")).norm(2, {1}).max().item<double>();
  EXPECT_GT(moved, 0.0);
  auto ins = run_lmtrain("inspect drift --from " + pre.string() + " --to " + (dir / "ft").string() + " --tokens " +
                         (dir / "ft" / "train.bin").string() + " -k 3");
  ASSERT_EQ(ins.exit_code, 0) << ins.output;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%10.6f", moved);
  EXPECT_NE(ins.output.find(buf), std::string::npos) << "max L2 " << buf << " missing: " << ins.output;
  EXPECT_NE(ins.output.find("unseen rows"), std::string::npos) << ins.output;
}

TEST(Finetune, AConfigContradictingTheCheckpointIsRejected) {
  ScratchDir dir("ft_bad");
  fs::path pre = pretrain(dir, true);
  auto r = finetune(dir, pre, "--set model.d_model=64");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.d_model: checkpoint 32 vs config 64"), std::string::npos) << r.output;
  r = finetune(dir, pre, "--set finetune.freeze=[blocks.9.]");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("blocks.9."), std::string::npos) << r.output;
  // unfreezing needs something frozen, and a step before the end
  r = finetune(dir, pre, "--set finetune.unfreeze_embeddings_after=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("finetune.unfreeze_embeddings_after: expected finetune.freeze_embeddings"), std::string::npos) << r.output;
  r = finetune(dir, pre, "--set finetune.freeze_embeddings=true --set finetune.unfreeze_embeddings_after=5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected < train.max_steps=5"), std::string::npos) << r.output;
}

}  // namespace lm::test
