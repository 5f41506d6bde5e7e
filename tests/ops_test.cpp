// The model's two sets of operations (model/ops.h, model/make_ops.h): the fused set follows the reference set
// for every architecture, the recipe's options included (no architecture is refused today: make_ops refuses
// `fused` only where fused::unsupported names an option, and for a GPU or bf16, Kernels.* in kernels_test).
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
  // The recipe's options (docs/recipe.md), each alone on the first, then all together.
  const model::GptConfig base = out.front();
  auto variant = [&](auto&& set) {
    model::GptConfig c = base;
    set(c);
    out.push_back(c);
  };
  variant([](model::GptConfig& c) { c.positions = model::Positions::kRope; });
  variant([](model::GptConfig& c) { c.qk_norm = true; });
  variant([](model::GptConfig& c) { c.mlp_activation = model::MlpActivation::kRelu2; });
  variant([](model::GptConfig& c) { c.bias = false; });
  variant([](model::GptConfig& c) { c.zero_init_proj = true; });
  variant([](model::GptConfig& c) { c.logit_softcap = 2.0; });
  variant([](model::GptConfig& c) {
    c.positions = model::Positions::kRope;
    c.rope_base = 500.0;
    c.qk_norm = true;
    c.mlp_activation = model::MlpActivation::kRelu2;
    c.bias = false;
    c.zero_init_proj = true;
    c.init_std = 0.03;
    c.embedding_init_std = 0.5;
    c.logit_softcap = 2.0;
  });
  return out;
}

std::string name_of(const model::GptConfig& c) { return model::describe(c); }

// 20 AdamW steps (clipped at 1; with `muon`, Muon for the blocks' matrices) of a model built from seed 5
// with `plan`'s operations, on one batch drawn from seed 9.
std::vector<double> twenty_losses(const model::GptConfig& arch, const model::ExecutionPlan& plan, bool muon = false) {
  torch::manual_seed(5);
  model::Gpt m(arch, plan.ops);
  train::TrainConfig tc;
  tc.lr = 3e-3;
  if (muon) tc.optimizer = train::OptimizerKind::kMuon;
  // fp32 Newton-Schulz products, made by `ops`: bf16 ones (the default where the CPU has them) are LibTorch's
  // whatever the set, and their rounding would magnify the sets' fp32 differences.
  tc.muon_precision = util::Precision::kFp32;
  const auto groups = train::split_decay_groups(*m, 1.0, {}, muon);
  train::RunOptimizer opt(groups, tc, plan);
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

}  // namespace

TEST(Ops, FusedSetFollowsTheReferenceForEveryArchitecture) {
  FusedThreads threads;
  const torch::Device cpu(torch::kCPU);
  for (const auto& arch : shared_architectures()) {
    const auto fused = model::make_ops(util::Kernels::kFused, cpu, torch::kFloat, arch);
    ASSERT_EQ(fused.ops->name(), "fused") << name_of(arch);
    const auto ref = model::make_ops(util::Kernels::kReference, cpu, torch::kFloat, arch);
    const auto a = twenty_losses(arch, ref), b = twenty_losses(arch, fused);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << name_of(arch) << ", step " << i + 1;
    EXPECT_LT(a.back(), a.front() - 0.05) << name_of(arch) << ": the loss never moved";
  }
  // Every option together, with Muon (configs/kjv-modern.yaml's optimizer): its Newton-Schulz products on
  // either set's threads.
  const model::GptConfig arch = shared_architectures().back();
  const auto a = twenty_losses(arch, model::make_ops(util::Kernels::kReference, cpu, torch::kFloat, arch), true);
  const auto b = twenty_losses(arch, model::make_ops(util::Kernels::kFused, cpu, torch::kFloat, arch), true);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << "with Muon, step " << i + 1;
  EXPECT_LT(a.back(), a.front() - 0.05) << "with Muon: the loss never moved";
}

// The soft-capped loss of either set is the cross-entropy of c tanh(logits / c), value and gradients.
TEST(Ops, TheSoftCappedLossIsTheCrossEntropyOfTheCappedLogits) {
  FusedThreads threads;
  const torch::Device cpu(torch::kCPU);
  model::GptConfig arch = tiny_config(64);
  arch.logit_softcap = 15.0;
  for (auto kernels : {util::Kernels::kReference, util::Kernels::kFused}) {
    const auto chosen = model::make_ops(kernels, cpu, torch::kFloat, arch);
    EXPECT_EQ(chosen.ops->name() == "fused", kernels == util::Kernels::kFused) << chosen.why;
    torch::manual_seed(6);
    const auto h = (torch::randn({300, 5}) * 10).requires_grad_(), w = (torch::randn({7, 5}) * 10).requires_grad_();
    const auto y = torch::randint(7, {300});
    auto got = chosen.ops->next_token_loss(h, w, y, 15.0);
    got.backward();
    const auto h2 = h.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
    auto want = torch::nn::functional::cross_entropy(15.0 * torch::tanh(torch::mm(h2, w2.t()) / 15.0), y);
    want.backward();
    EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-5) << chosen.ops->name();
    EXPECT_TRUE(torch::allclose(h.grad(), h2.grad(), 1e-4, 1e-6)) << chosen.ops->name();
    EXPECT_TRUE(torch::allclose(w.grad(), w2.grad(), 1e-4, 1e-6)) << chosen.ops->name();
  }
}

// Through the binary: every recipe option at once trains on the fused set under `fused` and under `auto`.
TEST(Ops, TheTrainerRunsEveryRecipeOptionOnTheFusedSet) {
  ScratchDir dir("ops_recipe");
  RunSpec spec;
  spec.model = "d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 16, positions: rope, qk_norm: true, "
               "mlp_activation: relu2, bias: false, zero_init_proj: true, logit_softcap: 15";
  for (const char* kernels : {"fused", "auto"}) {
    auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string() + " --overwrite --set run.kernels=" + kernels);
    ASSERT_EQ(r.exit_code, 0) << kernels << ": " << r.output;
    EXPECT_NE(r.output.find("fused ops (run.kernels " + std::string(kernels)), std::string::npos) << r.output;
  }
}

}  // namespace lm::test
