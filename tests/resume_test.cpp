// Trustworthy training through the real binary: bitwise resume after SIGTERM in a new process, kill -9
// during a save, the non-finite guard, retention, grad-accum equivalence, preflight on resume.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "data/token_file.h"
#include "train/step.h"
#include "test_util.h"

namespace lm::test {

namespace {

// `train -c` of a tiny run over the team corpus: eval every 4 steps, a checkpoint every 4, the newest 2 kept.
std::string config(const ScratchDir& dir, const std::string& run, int64_t steps, const std::string& extra = "") {
  RunSpec spec;
  spec.run = run;
  spec.seed = 5;
  spec.train = "batch_size: 4, max_steps: " + std::to_string(steps) +
               ", warmup_steps: 3, lr: 0.01, min_lr: 0.001, eval_every: 4, eval_batches: 2, log_every: 1";
  spec.extra = "checkpoint: {every: 4, keep_last: 2}\n" + extra;
  return "train -c " + write_run_config(dir, spec).string();
}

}  // namespace

TEST(Resume, SigtermThenResumeIsBitwiseIdenticalToAStraightRun) {
  ScratchDir dir("resume");
  const int64_t N = 15;
  const std::string every3 = " --set train.log_every=3";  // the stop lands inside a log window
  auto straight = run_lmtrain(config(dir, "straight", N) + every3);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  pid_t pid = spawn_lmtrain(config(dir, "split", N) + every3, dir / "split1.log", hold_at(dir, "step:7"));
  ASSERT_TRUE(held(dir, "step:7")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);  // after step 7, inside the log window of steps 7-9
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  const std::string log1 = slurp(dir / "split1.log");
  EXPECT_NE(log1.find("stopped by SIGTERM"), std::string::npos) << log1;
  const std::string latest = slurp(dir / "split" / "latest");
  ASSERT_FALSE(latest.empty());
  const int64_t k = std::stoll(latest.substr(5));
  EXPECT_EQ(k, 7) << "the stop came after the step it was held at";
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "split").string()).exit_code, 0);

  auto resumed = run_lmtrain(config(dir, "split", N) + every3 + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  EXPECT_EQ(losses(dir / "split"), losses(dir / "straight"));
  EXPECT_EQ(losses(dir / "split").size(), 5u);
  const fs::path a = dir / "straight" / checkpoint::step_name(N), b = dir / "split" / checkpoint::step_name(N);
  EXPECT_EQ(manifest_sha(a, "model.safetensors"), manifest_sha(b, "model.safetensors"));
  EXPECT_EQ(manifest_sha(a, "optimizer.pt"), manifest_sha(b, "optimizer.pt"));
  EXPECT_FALSE(manifest_sha(a, "model.safetensors").empty());
}

TEST(Resume, KillDuringASaveLeavesThePreviousCheckpointAndAutoResumeWorks) {
  ScratchDir dir("kill9");
  pid_t pid = spawn_lmtrain(config(dir, "run", 12), dir / "run.log", hold_at(dir, "save:step_00000008:file"));
  // The first checkpoint (step 4) commits; kill while the next one (step 8) is being written.
  ASSERT_TRUE(held(dir, "save:step_00000008:file")) << slurp(dir / "run.log");
  ASSERT_TRUE(fs::exists(dir / "run" / "step_00000004" / "manifest.json")) << slurp(dir / "run.log");
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  EXPECT_FALSE(fs::exists(dir / "run" / "step_00000008"));
  auto v = run_lmtrain("ckpt verify " + (dir / "run").string());
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("step_00000004"), std::string::npos) << v.output;
  auto r = run_lmtrain(config(dir, "run", 12) + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("removed unfinished save"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from " + (dir / "run" / "step_00000004").string()), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "run" / "step_00000012" / "manifest.json"));
}

TEST(Resume, InjectedNanStopsWithExit5AndNoLaterCheckpoint) {
  ScratchDir dir("nan");
  auto r = run_lmtrain_faults("LMTRAIN_TEST_NAN_STEP=6", config(dir, "run", 12));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_NE(r.output.find("non-finite value at step 6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step_00000004"), std::string::npos) << "names the last valid checkpoint: " << r.output;
  for (auto& ck : checkpoint::list_checkpoints(dir / "run")) EXPECT_LT(ck.filename().string(), "step_00000006");
  EXPECT_TRUE(fs::exists(dir / "run" / "step_00000004"));

  r = run_lmtrain_faults("LMTRAIN_TEST_NAN_STEP=6", config(dir, "skip", 8) + " --set train.on_nonfinite=skip");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped (1 of at most 3 in a row)"), std::string::npos) << r.output;
}

TEST(Resume, AFailedSaveKeepsThePreviousCheckpointAndOnlyTheFinalOneIsFatal) {
  ScratchDir dir("savefail");
  auto r = run_lmtrain_faults("LMTRAIN_TEST_FAIL_SAVE=step_00000008", config(dir, "run", 12));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("training continues"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run" / "step_00000008"));
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "run" / "step_00000004").string()).exit_code, 0);
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "run" / "step_00000012").string()).exit_code, 0);
  for (auto& e : fs::directory_iterator(dir / "run")) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }

  r = run_lmtrain_faults("LMTRAIN_TEST_FAIL_SAVE=step_00000012", config(dir, "final", 12));
  EXPECT_EQ(r.exit_code, 6) << r.output;
  EXPECT_EQ(slurp(dir / "final" / "latest"), "step_00000008\n");
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "final").string()).exit_code, 0);
}

TEST(Resume, EarlyStoppingAfterPatienceValidationsWithoutImprovement) {
  ScratchDir dir("early");
  // lr 1e-12 cannot move float32 weights, so the second validation cannot improve on the first.
  auto r = run_lmtrain(config(dir, "run", 40) +
                       " --set train.lr=1e-12 --set train.min_lr=0 --set train.eval_every=2 "
                       "--set train.early_stopping_patience=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("early stopping: 1 validations without improvement"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped early"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "run" / "step_00000004" / "manifest.json"));
  EXPECT_FALSE(fs::exists(dir / "run" / "step_00000006"));
}

// A checkpoint records the precision it trained in; a resume under run.precision auto keeps it instead of
// measuring again (a measurement near the margin could pick the other one).
TEST(Resume, AutoPrecisionResumesInThePrecisionTheRunBegan) {
  ScratchDir dir("auto-precision");
  auto r = run_lmtrain(config(dir, "run", 4) + " --set run.precision=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.output.find("precision fp32 (auto: ") != std::string::npos ||
              r.output.find("precision bf16 (auto: ") != std::string::npos)
      << r.output;
  const std::string state = slurp(dir / "run" / checkpoint::step_name(4) / "trainer_state.json");
  const bool bf16 = state.find("\"precision\": \"bf16\"") != std::string::npos;
  EXPECT_TRUE(bf16 || state.find("\"precision\": \"fp32\"") != std::string::npos) << state;
  r = run_lmtrain(config(dir, "run", 8) + " --set run.precision=auto --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::string("precision ") + (bf16 ? "bf16" : "fp32") + " (auto: as the run began)"),
            std::string::npos)
      << r.output;
}

TEST(Resume, RetentionKeepsKeepLastPlusBest) {
  ScratchDir dir("keep");
  auto r = run_lmtrain(config(dir, "run", 20) + " --set checkpoint.every=2 --set train.eval_every=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto steps = checkpoint::list_checkpoints(dir / "run");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].filename(), "step_00000018");
  EXPECT_EQ(steps[1].filename(), "step_00000020");
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "run" / "best").string()).exit_code, 0);
  EXPECT_EQ(slurp(dir / "run" / "latest"), "step_00000020\n");
}

TEST(Resume, AutoWithOnlyInvalidCheckpointsRefusesUnlessOverwrite) {
  ScratchDir dir("allbad");
  auto r = run_lmtrain(config(dir, "run", 4) + " --set checkpoint.every=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (auto& ckpt : checkpoint::list_checkpoints(dir / "run")) std::ofstream(ckpt / "model.safetensors", std::ios::app) << "x";
  r = run_lmtrain(config(dir, "run", 6) + " --resume auto");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("fail verification"), std::string::npos) << r.output;
  r = run_lmtrain(config(dir, "run", 6) + " --resume auto --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("starting fresh"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir / "run" / "latest"), "step_00000006\n");
}

TEST(Resume, GradAccumGivesTheSameGradientsAsOneLargeBatch) {
  ScratchDir dir("accum_grad");
  std::vector<int32_t> ids(600);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + i / 13) % 64);
  data::write_token_file(dir / "d.bin", ids, 64, std::string(64, '0'), std::string(64, '0'));
  data::TokenFile f(dir / "d.bin");
  torch::manual_seed(8);
  model::Gpt m(tiny_config(64));
  data::Batcher big(f, 8, 8, 77), small(f, 4, 8, 77);
  const double l1 = train::accumulate_gradients(*m, big, 1);
  std::vector<torch::Tensor> g1;
  for (auto& p : m->parameters()) g1.push_back(p.grad().clone());
  const double l2 = train::accumulate_gradients(*m, small, 2);
  EXPECT_NEAR(l1, l2, 1e-6);
  auto params = m->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_LT((g1[i] - params[i].grad()).abs().max().item<double>(), 1e-6) << "parameter " << i;
  }
  EXPECT_EQ(small.cursor(), 2u);
}

TEST(Resume, GradAccumTrainsLikeOneLargeBatch) {
  ScratchDir dir("accum");
  auto a = run_lmtrain(config(dir, "big", 3) + " --set train.batch_size=8");
  auto b = run_lmtrain(config(dir, "accum", 3) + " --set train.batch_size=4 --set train.grad_accum=2");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto ma = checkpoint::load_checkpoint(dir / "big"), mb = checkpoint::load_checkpoint(dir / "accum");
  auto wa = model::named_weights(*ma.model), wb = model::named_weights(*mb.model);
  ASSERT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (size_t i = 0; i < wa.size(); ++i) worst = std::max(worst, (wa[i].second - wb[i].second).abs().max().item<double>());
  // Gradients agree to 1e-6 (test above); Adam's g/sqrt(v) magnifies float32 rounding in near-zero
  // gradient components, so after 3 steps the weights agree to 1e-4.
  EXPECT_LT(worst, 1e-4);
  // and the weights did move away from the same-seed initialisation
  torch::manual_seed(5);
  model::Gpt fresh(ma.arch);
  EXPECT_GT((wa[0].second - model::named_weights(*fresh)[0].second).abs().max().item<double>(), 1e-4);
}

TEST(Resume, TheReleaseBinaryIgnoresFaultVariables) {
  ScratchDir dir("release");
  // The test build poisons step 2 and stops with exit 5 ...
  auto faulty = run_lmtrain_faults("LMTRAIN_TEST_NAN_STEP=2", config(dir, "faulty", 4));
  EXPECT_EQ(faulty.exit_code, 5) << faulty.output;
  // ... the release binary trains normally, with the same losses as a run without the variables.
  const std::string all = "LMTRAIN_TEST_NAN_STEP=1 LMTRAIN_TEST_FAIL_SAVE=step_00000004 LMTRAIN_TEST_INF_GRAD_STEP=2 "
                          "LMTRAIN_TEST_KILL_SAVE=step_00000004:file " + hold_at(dir, "step:1");
  auto r = run_command("env " + all + " " + std::string(LMTRAIN_BINARY) + " " + config(dir, "release", 4));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("non-finite"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("injected"), std::string::npos) << r.output;
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "release" / "step_00000004").string()).exit_code, 0);
  auto plain = run_lmtrain(config(dir, "plain", 4));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(losses(dir / "release").size(), 4u);
  EXPECT_EQ(losses(dir / "release"), losses(dir / "plain"));
  // and its executables (the front and the full one it runs) do not even contain the variable names: the
  // reader is not linked in
  for (const char* path : {LMTRAIN_BINARY, LMTRAIN_FULL_BINARY}) {
    const std::string exe = slurp(path);
    ASSERT_GT(exe.size(), 1000u) << path;
    EXPECT_EQ(exe.find("LMTRAIN_TEST_"), std::string::npos) << path;
  }
  EXPECT_NE(slurp(LMTRAIN_FAULTS_BINARY).find("LMTRAIN_TEST_NAN_STEP"), std::string::npos);
}

TEST(Resume, MismatchedArchitectureIsRefusedBeforeLoadingTensors) {
  ScratchDir dir("arch");
  ASSERT_EQ(run_lmtrain(config(dir, "run", 4)).exit_code, 0);
  auto r = run_lmtrain(config(dir, "run", 8) + " --resume auto --set model.d_model=64");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("model.d_model: checkpoint 32 vs config 64"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("weight"), std::string::npos) << "failed while loading tensors: " << r.output;
  // The tokenizer's settings come from the checkpoint's own tokenizer.model: a change would retrain it.
  const std::string tokenizer_before = slurp(dir / "run" / "tokenizer.model");
  r = run_lmtrain(config(dir, "run", 8) + " --resume auto --set tokenizer.byte_fallback=true --set "
                  "tokenizer.normalization=identity");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("tokenizer.byte_fallback: checkpoint false vs config true"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokenizer.normalization: checkpoint nfkc vs config identity"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir / "run" / "tokenizer.model"), tokenizer_before) << "the run's tokenizer is kept";
  r = run_lmtrain(config(dir, "run", 8) + " --resume auto --set train.lr=0.02");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train.lr changed"), std::string::npos) << r.output;
  r = run_lmtrain("ckpt info " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_field(r.output, "step", "8")) << r.output;
}

}  // namespace lm::test
