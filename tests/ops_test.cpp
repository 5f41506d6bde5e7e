// The model's two sets of operations (model/ops.h, model/make_ops.h): the fused set follows the reference set
// for every architecture both implement, and an architecture the fused set lacks is refused under `fused`
// and computed by the reference set under `auto`.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/make_ops.h"
#include "test_util.h"
#include "train/optimizer.h"
#include "util/errors.h"
#include "util/threads.h"

namespace lm::test {

namespace {

// Every architecture option the fused set implements, each value of each.
std::vector<model::GptConfig> shared_architectures() {
  std::vector<model::GptConfig> out;
  for (const auto pos : {model::Positions::kLearned, model::Positions::kSinusoidal}) {
    for (const bool tied : {true, false}) {
      for (const auto scale : {model::EmbeddingScale::kNone, model::EmbeddingScale::kSqrtD}) {
        model::GptConfig c = tiny_config(96, tied);
        c.d_model = 32;
        c.n_heads = 4;
        c.max_seq_len = 16;
        c.positions = pos;
        c.embedding_scale = scale;
        out.push_back(c);
      }
    }
  }
  return out;
}

std::string name_of(const model::GptConfig& c) {
  return model::to_string(c.positions) + (c.tie_embeddings ? " tied " : " untied ") + model::to_string(c.embedding_scale);
}

// 20 AdamW steps (clipped at 1) of a model built from seed 5 with `ops`, on one batch drawn from seed 9.
std::vector<double> twenty_losses(const model::GptConfig& arch, const model::OpsPtr& ops) {
  torch::manual_seed(5);
  model::Gpt m(arch, ops);
  train::TrainConfig tc;
  tc.lr = 3e-3;
  const auto groups = train::split_decay_groups(*m);
  train::RunOptimizer opt(groups, tc, ops);
  torch::manual_seed(9);
  const auto x = torch::randint(arch.vocab_size, {6, arch.max_seq_len}), y = torch::randint(arch.vocab_size, {6, arch.max_seq_len});
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) {
    m->zero_grad(true);
    auto loss = m->forward(x, y);
    loss.backward();
    opt.step(train::grad_clip(groups.all(), 1.0));
    losses.push_back(loss.item<double>());
  }
  return losses;
}

// Two LibTorch threads and one OpenBLAS thread a call (the trainer's setting for the fused set).
struct FusedThreads {
  int threads = torch::get_num_threads(), blas = util::blas_threads();
  FusedThreads() { util::set_compute_threads(2, 1); }
  ~FusedThreads() { util::set_compute_threads(threads, std::max(1, blas)); }
};

}  // namespace

TEST(Ops, FusedSetFollowsTheReferenceForEveryArchitecture) {
  FusedThreads threads;
  const torch::Device cpu(torch::kCPU);
  for (const auto& arch : shared_architectures()) {
    const auto fused = model::make_ops(util::Kernels::kFused, cpu, torch::kFloat, arch);
    ASSERT_TRUE(fused.ops->fused()) << name_of(arch);
    const auto ref = model::make_ops(util::Kernels::kReference, cpu, torch::kFloat, arch);
    const auto a = twenty_losses(arch, ref.ops), b = twenty_losses(arch, fused.ops);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << name_of(arch) << ", step " << i + 1;
    EXPECT_LT(a.back(), a.front() - 0.05) << name_of(arch) << ": the loss never moved";
  }
}

// relu2 is the reference set's alone: `fused` refuses it naming the option (exit 2), `auto` takes the
// reference set and says why, and the reference set computes relu(x)^2.
TEST(Ops, AnArchitectureTheFusedSetLacksIsRefusedOrFallsBack) {
  const torch::Device cpu(torch::kCPU);
  model::GptConfig arch = tiny_config(64);
  arch.mlp_activation = model::MlpActivation::kRelu2;
  try {
    model::make_ops(util::Kernels::kFused, cpu, torch::kFloat, arch);
    ADD_FAILURE() << "run.kernels fused accepted mlp_activation relu2";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("model.mlp_activation relu2"), std::string::npos) << e.what();
  }
  const auto chosen = model::make_ops(util::Kernels::kAuto, cpu, torch::kFloat, arch);
  EXPECT_FALSE(chosen.ops->fused());
  EXPECT_NE(chosen.why.find("reference ops (run.kernels auto): model.mlp_activation relu2"), std::string::npos)
      << chosen.why;
  const auto x = torch::randn({3, 5}), w = torch::randn({7, 5}), b = torch::randn({7});
  const auto h = torch::nn::functional::linear(x, w, b);
  EXPECT_TRUE(torch::allclose(chosen.ops->linear_act(x, w, b, model::MlpActivation::kRelu2),
                              torch::where(h > 0, h * h, torch::zeros_like(h))));
}

// The same through the binary: the refusal before anything is written, and auto's log line.
TEST(Ops, TheTrainerRefusesOrFallsBackForRelu2) {
  ScratchDir dir("ops_relu2");
  RunSpec spec;
  spec.model = "d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 16, mlp_activation: relu2";
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string() + " --set run.kernels=fused");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("run.kernels fused: the fused kernels do not apply: model.mlp_activation relu2"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / spec.run / "latest")) << "a refused run wrote a checkpoint";
  r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reference ops (run.kernels auto): model.mlp_activation relu2: the fused kernels "
                          "implement the gelu MLP only"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(reference ops, OpenBLAS"), std::string::npos) << r.output;
}

}  // namespace lm::test
