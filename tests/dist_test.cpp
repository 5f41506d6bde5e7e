// Data-parallel training (docs/training.md "More than one process"): the launch variables, the global batch split
// by rank, and real multi-process runs on loopback: 2 ranks x b against 1 rank x 2b, identical replicas, a
// SIGTERM'd 2-rank run resumed, a killed rank (exit 7), a NaN on one rank, a rank that never joins, a
// resume with another world size, torchrun --no_python, fine-tuning, and the run-directory lock.
#include <gtest/gtest.h>

#include <csignal>
#include <cmath>
#include <map>

#include "checkpoint/checkpoint.h"
#include "data/batcher.h"
#include "dist/launch_env.h"
#include "dist/local_launch.h"
#include "test_util.h"
#include "util/errors.h"

namespace lm::test {
namespace {

std::optional<dist::LaunchEnv> env_of(const std::map<std::string, std::string>& vars) {
  return dist::read_launch_env([&](const char* k) -> std::optional<std::string> {
    auto it = vars.find(k);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

TEST(DistEnv, ReadsTheTorchrunVariables) {
  EXPECT_FALSE(env_of({}).has_value());  // no WORLD_SIZE: one process
  auto e = env_of({{"WORLD_SIZE", "4"}, {"RANK", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "10.0.0.1"},
                   {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                   {"TORCHELASTIC_RESTART_COUNT", "1"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->master_addr, "10.0.0.1");
  EXPECT_TRUE(e->agent_store);
  EXPECT_EQ(e->store_prefix, "/worker/attempt_1");
}

TEST(DistEnv, RejectsBadVariablesAllAtOnce) {
  try {
    env_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_PORT", "70000"}});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("RANK: expected an integer in [0, 1], got '2'"), std::string::npos) << m;
    EXPECT_NE(m.find("MASTER_ADDR"), std::string::npos) << m;
    EXPECT_NE(m.find("MASTER_PORT: expected an integer in [1, 65535], got '70000'"), std::string::npos) << m;
  }
}

TEST(DistLaunch, CombinesExitCodesAndStripsNproc) {
  using dist::RankExit;
  EXPECT_EQ(dist::combined_exit_code({{143, 0}, {143, 0}}), 143);
  EXPECT_EQ(dist::combined_exit_code({{7, 0}, {0, SIGKILL}}), 7);  // a killed rank: the survivor's 7
  EXPECT_EQ(dist::combined_exit_code({{3, 0}, {7, 0}}), 3);         // the cause, not the consequence
  EXPECT_EQ(dist::without_nproc({"train", "--nproc", "2", "-c", "x.yaml", "--nproc=3"}),
            (std::vector<std::string>{"train", "-c", "x.yaml"}));
}

TEST(DistBatcher, RanksSliceTheGlobalBatch) {
  ScratchDir dir("dist-batch");
  const fs::path bin = dir / "t.bin";
  {
    std::vector<int32_t> ids(500);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 97);
    data::write_token_file(bin, ids, 128, "", "");
  }
  data::TokenFile file(bin);
  data::Batcher whole(file, 6, 8, 5), r0(file, 3, 8, 5, 0, 2), r1(file, 3, 8, 5, 1, 2);
  for (uint64_t k : {0u, 1u, 7u}) {
    auto both = torch::cat({r0.at(k).x, r1.at(k).x}, 0);
    EXPECT_TRUE(torch::equal(both, whole.at(k).x)) << "global batch " << k;
  }
}

// ---- real processes on loopback ----

constexpr const char* kTrain = "batch_size: 8, max_steps: 20, warmup_steps: 2, eval_every: 10, log_every: 1";
constexpr const char* kCkpt = "checkpoint: {every: 5, keep_last: 2}\n";

std::string train_args(const ScratchDir& dir, const std::string& run, int batch, const std::string& more = "") {
  RunSpec spec;
  spec.run = run;
  spec.train = kTrain;
  spec.extra = kCkpt;
  return "train -c " + write_run_config(dir, spec).string() + " --set train.batch_size=" + std::to_string(batch) +
         " --set dist.timeout_s=10 " + more;
}

TEST(DistRun, TwoRanksMatchOneRankWithTwiceTheBatch) {
  ScratchDir dir("dist-equiv");
  auto one = run_lmtrain(train_args(dir, "one", 8));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = run_lmtrain(train_args(dir, "two", 4, "--nproc 2"));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("global batch 2 processes x 4 sequences"), std::string::npos) << two.output;
  const auto a = losses(dir / "one"), b = losses(dir / "two");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(std::stod(a[i]) - std::stod(b[i])));
  EXPECT_LT(worst, 1e-5) << "largest loss difference over 20 steps";
  std::printf("2 ranks x 4 vs 1 rank x 8: largest loss difference over 20 steps %.3g\n", worst);
  // Bitwise-equal replicas: every rank's weight digest is compared at each checkpoint and at the end.
  EXPECT_NE(two.output.find("2 ranks hold identical weights at step 20"), std::string::npos) << two.output;
}

TEST(DistRun, SigtermedTwoRankRunResumesToTheSameWeights) {
  ScratchDir dir("dist-resume");
  auto straight = run_lmtrain(train_args(dir, "straight", 4, "--nproc 2"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const pid_t pid = spawn_lmtrain(train_args(dir, "split", 4, "--nproc 2"), dir / "split1.log", hold_at(dir, "step:7"));
  ASSERT_TRUE(held(dir, "step:7@0") && held(dir, "step:7@1")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);  // the launcher forwards it to both ranks
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  const std::string latest = slurp(dir / "split" / "latest");
  ASSERT_FALSE(latest.empty());
  // The ranks agree on a signal in the all-reduce after the next step's backward pass: both stop after step 8.
  EXPECT_EQ(std::stoll(latest.substr(5)), 8) << "the ranks did not stop at the first step after the signal";
  auto resumed = run_lmtrain(train_args(dir, "split", 4, "--nproc 2 --resume auto"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(losses(dir / "split"), losses(dir / "straight"));
  const fs::path a = dir / "straight" / checkpoint::step_name(20), b = dir / "split" / checkpoint::step_name(20);
  EXPECT_EQ(manifest_sha(a, "model.safetensors"), manifest_sha(b, "model.safetensors"));
  EXPECT_FALSE(manifest_sha(a, "model.safetensors").empty());
  // Another world size would slice the batches differently: refused, nothing trained.
  auto other = run_lmtrain(train_args(dir, "split", 8, "--resume auto --set train.max_steps=30"));
  EXPECT_EQ(other.exit_code, 4) << other.output;
  EXPECT_NE(other.output.find("processes (WORLD_SIZE): checkpoint 2 vs config 1"), std::string::npos) << other.output;
}

std::string rank_env(int rank, int port, const std::string& more = "") {
  return "RANK=" + std::to_string(rank) + " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
         " " + more;
}

TEST(DistRun, KilledRankEndsTheOtherWithExit7) {
  ScratchDir dir("dist-kill");
  const int port = dist::free_port();
  const std::string args = train_args(dir, "run", 4, "--set train.max_steps=400 --set dist.timeout_s=5");
  // Both ranks held after step 6 (step 5's checkpoint committed); rank 1 killed there, rank 0 let go.
  const pid_t r0 = spawn_lmtrain(args, dir / "r0.log", rank_env(0, port, hold_at(dir, "step:6")));
  const pid_t r1 = spawn_lmtrain(args, dir / "r1.log", rank_env(1, port, hold_at(dir, "step:6")));
  ASSERT_TRUE(held(dir, "step:6@0") && held(dir, "step:6@1")) << slurp(dir / "r0.log");
  ::kill(r1, SIGKILL);
  EXPECT_EQ(wait_exit(r1), 128 + SIGKILL);
  let_go(dir, "step:6@0");
  EXPECT_EQ(wait_exit(r0), 7) << slurp(dir / "r0.log");
  const std::string log = slurp(dir / "r0.log");
  EXPECT_NE(log.find("lost rank(s) 1"), std::string::npos) << log;
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "run").string()).exit_code, 0);
}

TEST(DistRun, RankThatNeverJoinsIsNamed) {
  ScratchDir dir("dist-join");
  const int port = dist::free_port();
  auto r = run_command("env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                       LMTRAIN_BINARY + " " + train_args(dir, "run", 4, "--set dist.timeout_s=2"));
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("rank(s) 1 of 2 never joined"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run" / "train.bin"));  // nothing prepared or trained
}

TEST(DistRun, NanOnOneRankStopsEveryRank) {
  ScratchDir dir("dist-nan");
  auto r = run_lmtrain_faults("LMTRAIN_TEST_NAN_STEP=3 LMTRAIN_TEST_NAN_RANK=1", train_args(dir, "run", 4, "--nproc 2"));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  // Each rank ends with the same error line (counted without the "error: " prefix: the two ranks write to one
  // pipe, and a line of one can land between the prefix and the message of the other).
  size_t stopped = 0;
  for (size_t at = 0; (at = r.output.find("[train] non-finite value at step 3", at)) != std::string::npos; ++at) {
    ++stopped;
  }
  EXPECT_EQ(stopped, 2u) << r.output;
}

TEST(DistRun, TorchrunNoPythonLaunch) {
  if (run_command("command -v torchrun").exit_code != 0) GTEST_SKIP() << "torchrun not installed (python3-torch)";
  ScratchDir dir("dist-torchrun");
  auto ours = run_lmtrain(train_args(dir, "ours", 4, "--nproc 2"));
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  // --redirects 1 --tee 1: torch 1.13's torchrun crashes with its defaults under Python 3.11 (docs/training.md).
  auto r = run_command("torchrun --redirects 1 --tee 1 --no_python --nproc_per_node 2 --master_port " +
                       std::to_string(dist::free_port()) + " " + LMTRAIN_BINARY + " " +
                       train_args(dir, "torchrun", 4));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(losses(dir / "torchrun"), losses(dir / "ours"));
  EXPECT_EQ(manifest_sha(dir / "torchrun" / checkpoint::step_name(20), "model.safetensors"),
            manifest_sha(dir / "ours" / checkpoint::step_name(20), "model.safetensors"));
}

TEST(DistRun, FinetuneWithFrozenEmbeddingsOnTwoRanks) {
  ScratchDir dir("dist-finetune");
  auto base = run_lmtrain(train_args(dir, "base", 8, "--set train.max_steps=5"));
  ASSERT_EQ(base.exit_code, 0) << base.output;
  RunSpec ft;
  ft.run = "ft";
  ft.tokenizer = ft.model = "";
  ft.train = "batch_size: 4, max_steps: 6, warmup_steps: 1, eval_every: 0, log_every: 1";
  ft.extra = "finetune: {freeze_embeddings: true, original_val: " + data_file("tiny_en_val.txt").string() + "}\n";
  auto r = run_lmtrain("finetune --from " + (dir / "base").string() + " -c " + write_run_config(dir, ft).string() +
                       " --nproc 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("frozen tensors unchanged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 ranks hold identical weights at step 6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("forgetting report"), std::string::npos) << r.output;
}

TEST(RunLock, SecondTrainerOnTheSameRunDirIsRefused) {
  ScratchDir dir("run-lock");
  const std::string args = train_args(dir, "run", 4, "--set train.max_steps=400");
  const pid_t first = spawn_lmtrain(args, dir / "first.log", hold_at(dir, "step:6"));
  ASSERT_TRUE(held(dir, "step:6")) << slurp(dir / "first.log");
  auto second = run_lmtrain(args + " --resume auto");
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find("is in use"), std::string::npos) << second.output;
  ::kill(first, SIGTERM);
  EXPECT_EQ(wait_exit(first), 143);
  auto third = run_lmtrain(args + " --resume auto --set train.max_steps=8");  // the lock died with its holder
  EXPECT_EQ(third.exit_code, 0) << third.output;
}

}  // namespace
}  // namespace lm::test
