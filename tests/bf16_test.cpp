// bf16 products (run.precision bf16): oneDNN's product with an fp32 result (model/fused/bf16_products.h), the
// weight copies the optimizer step refreshes (model/weight_copies.h), the fused set in bf16 against the
// reference set in bf16, a frozen token table, resume and two processes. Skipped, with the reason, where the
// build has no oneDNN or the CPU no bf16 instructions.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "model/fused/bf16_products.h"
#include "model/gpt.h"
#include "model/make_ops.h"
#include "test_util.h"
#include "train/optimizer.h"
#include "util/device.h"
#include "util/threads.h"

namespace lm::test {

namespace {

namespace kn = model::kernels;

// Why bf16 products cannot be tested here, or "".
std::string bf16_missing() {
  if (!kn::bf16_products_built()) return "this build has no oneDNN (libdnnl-dev): the fused set refuses bf16";
  if (!util::native_bf16_products(torch::Device(torch::kCPU))) return "this CPU has no bf16 matrix instructions";
  return "";
}

#define SKIP_WITHOUT_BF16()                                   \
  if (const std::string why = bf16_missing(); !why.empty()) { \
    GTEST_SKIP() << why;                                      \
  }

// `steps` AdamW steps (clipped at 1) of a model built from seed 5 with `plan`, on one batch from seed 9; with
// `freeze_table` the token table has no gradient. Returns the losses; `table` gets the table after.
std::vector<double> losses_of(const model::GptConfig& arch, const model::ExecutionPlan& plan, int steps,
                              bool freeze_table = false, torch::Tensor* table = nullptr) {
  torch::manual_seed(5);
  model::Gpt m(arch, plan.ops);
  if (freeze_table) m->tok_emb->weight.set_requires_grad(false);
  train::TrainConfig tc;
  tc.lr = 3e-3;
  const auto groups = train::split_decay_groups(*m);
  train::RunOptimizer opt(groups, tc, plan);
  torch::manual_seed(9);
  const auto x = torch::randint(arch.vocab_size, {6, arch.max_seq_len});
  const auto y = torch::randint(arch.vocab_size, {6, arch.max_seq_len});
  std::vector<double> out;
  for (int step = 0; step < steps; ++step) {
    m->zero_grad(true);
    auto loss = m->forward(x, y);
    loss.backward();
    opt.step(train::grad_clip(groups.all(), 1.0));
    out.push_back(loss.item<double>());
  }
  if (table) *table = m->tok_emb->weight.detach().clone();
  return out;
}

model::GptConfig small_arch() {
  model::GptConfig c = tiny_config(96);
  c.d_model = 32;
  c.n_heads = 4;
  return c;
}

}  // namespace

// out = alpha a b (+ out) for bf16 a, b in every layout, against the same bf16 values multiplied in double.
TEST(Bf16, TheProductHasAnFp32ResultForEveryLayoutAndMode) {
  SKIP_WITHOUT_BF16();
  torch::manual_seed(1);
  for (auto [M, K, N] : {std::array<int64_t, 3>{300, 64, 40}, {7, 200, 1001}, {128, 128, 128}}) {
    for (int layout = 0; layout < 4; ++layout) {
      const auto a = (layout & 1 ? torch::randn({K, M}).t() : torch::randn({M, K})).to(torch::kBFloat16);
      const auto b = (layout & 2 ? torch::randn({N, K}).t() : torch::randn({K, N})).to(torch::kBFloat16);
      const auto exact = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
      for (const bool accumulate : {false, true}) {
        const auto c0 = torch::randn({M, N});
        auto c = c0.clone();
        kn::mm_bf16(c, a, b, accumulate, 0.5);
        const auto want = 0.5 * exact + (accumulate ? c0.to(torch::kDouble) : torch::zeros_like(exact));
        const double err = (c.to(torch::kDouble) - want).abs().max().item<double>();
        // fp32 accumulation of K products of bf16 values: a few fp32 ulps of the sum's size, far below bf16's.
        EXPECT_LT(err, 1e-5 * std::sqrt(static_cast<double>(K)) * want.abs().max().item<double>() + 1e-6)
            << M << "x" << K << "x" << N << " layout " << layout << " accumulate " << accumulate;
        EXPECT_EQ(c.scalar_type(), torch::kFloat);
      }
    }
  }
  std::cout << "[ note     ] oneDNN ran " << kn::bf16_products_isa() << std::endl;
}

// A copy is made once and reused until the optimizer step says the weights changed; then it is made again.
TEST(Bf16, WeightCopiesLastUntilTheOptimizerStep) {
  model::WeightCopies copies;
  auto w = torch::randn({4, 3}).requires_grad_();
  const at::Tensor first = copies.of(w);
  EXPECT_EQ(first.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(copies.of(w).is_same(first)) << "a second use made a second copy";
  {
    torch::NoGradGuard no_grad;
    w.add_(1.0);
  }
  EXPECT_TRUE(copies.of(w).is_same(first)) << "copies follow the optimizer's word, not tensor versions";
  copies.weights_changed();
  EXPECT_EQ(copies.size(), 0u);
  EXPECT_TRUE(torch::equal(copies.of(w), w.detach().to(torch::kBFloat16)));
}

// The fused set's bf16 products follow the reference set's bf16 over 20 steps, for the default and the
// recipe's architecture. The bound is measured: both round the same operands to bf16, but the reference
// rounds each product's result to bf16 too and sums in another order; the largest difference seen here is
// printed (about 9e-4 on an AVX512-BF16 CPU; 3e-3 from fp32's). Both stay near fp32's losses.
TEST(Bf16, TheFusedSetFollowsTheReferenceSetInBf16) {
  SKIP_WITHOUT_BF16();
  FusedThreads threads;
  const torch::Device cpu(torch::kCPU);
  model::GptConfig recipe = small_arch();
  recipe.positions = model::Positions::kRope;
  recipe.qk_norm = true;
  recipe.mlp_activation = model::MlpActivation::kRelu2;
  recipe.bias = false;
  recipe.logit_softcap = 15.0;
  for (const auto& arch : {small_arch(), recipe}) {
    const auto fp32 = losses_of(arch, model::make_ops(util::Kernels::kReference, cpu, torch::kFloat, arch), 20);
    const auto ref = losses_of(arch, model::make_ops(util::Kernels::kReference, cpu, torch::kBFloat16, arch), 20);
    const auto fused = losses_of(arch, model::make_ops(util::Kernels::kFused, cpu, torch::kBFloat16, arch, 1, 2), 20);
    double worst = 0, worst_fp32 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, std::abs(ref[i] - fused[i]));
      worst_fp32 = std::max(worst_fp32, std::abs(fp32[i] - fused[i]));
    }
    std::cout << "[ note     ] " << model::describe(arch) << ": fused bf16 vs reference bf16, largest loss difference "
              << worst << "; vs reference fp32 " << worst_fp32 << std::endl;
    EXPECT_LT(worst, 5e-3) << model::describe(arch);
    EXPECT_LT(worst_fp32, 1e-2) << model::describe(arch);
    EXPECT_LT(fused.back(), fused.front() - 0.05) << "the loss never moved";
  }
}

// A frozen token table stays bit-identical while the rest trains on bf16 products.
TEST(Bf16, AFrozenTokenTableStaysBitIdentical) {
  SKIP_WITHOUT_BF16();
  FusedThreads threads;
  const auto arch = small_arch();
  torch::manual_seed(5);
  const torch::Tensor before = model::Gpt(arch)->tok_emb->weight.detach().clone();
  torch::Tensor after;
  const auto plan = model::make_ops(util::Kernels::kFused, torch::Device(torch::kCPU), torch::kBFloat16, arch, 1, 2);
  const auto losses = losses_of(arch, plan, 5, /*freeze_table=*/true, &after);
  EXPECT_TRUE(torch::equal(before, after));
  EXPECT_LT(losses.back(), losses.front()) << "nothing else trained";
}

namespace {

// `train -c` of a tiny bf16 run on the fused set: a checkpoint every 4 steps.
std::string bf16_run(const ScratchDir& dir, const std::string& run, int64_t steps, int batch, const std::string& more = "") {
  RunSpec spec;
  spec.run = run;
  spec.seed = 5;
  spec.train = "batch_size: " + std::to_string(batch) + ", max_steps: " + std::to_string(steps) +
               ", warmup_steps: 3, lr: 0.01, eval_every: 4, eval_batches: 2, log_every: 1";
  spec.extra = "checkpoint: {every: 4, keep_last: 2}\n";
  return "train -c " + write_run_config(dir, spec).string() +
         " --set run.precision=bf16 --set run.kernels=fused --set dist.timeout_s=20 " + more;
}

}  // namespace

// Resume is bit for bit in bf16: 12 steps straight equal 7, SIGTERM, and a resume to 12.
TEST(Bf16, ResumeIsBitwiseInBf16) {
  SKIP_WITHOUT_BF16();
  ScratchDir dir("bf16-resume");
  auto straight = run_lmtrain(bf16_run(dir, "straight", 12, 4));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("precision bf16 (run.precision bf16)"), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find("bf16 products (oneDNN)"), std::string::npos) << straight.output;
  pid_t pid = spawn_lmtrain(bf16_run(dir, "split", 12, 4), dir / "split1.log", hold_at(dir, "step:7"));
  ASSERT_TRUE(held(dir, "step:7")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  auto resumed = run_lmtrain(bf16_run(dir, "split", 12, 4, "--resume auto"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(losses(dir / "split"), losses(dir / "straight"));
  const fs::path a = dir / "straight" / checkpoint::step_name(12), b = dir / "split" / checkpoint::step_name(12);
  EXPECT_EQ(manifest_sha(a, "model.safetensors"), manifest_sha(b, "model.safetensors"));
  EXPECT_FALSE(manifest_sha(a, "model.safetensors").empty());
}

// Two processes of 4 sequences follow one of 8 in bf16, within a measured bound (the gradients are summed
// in another order before the same bf16 rounding of the next step's weights; measured 6e-5).
TEST(Bf16, TwoProcessesFollowOneInBf16) {
  SKIP_WITHOUT_BF16();
  ScratchDir dir("bf16-dist");
  auto one = run_lmtrain(bf16_run(dir, "one", 12, 8));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = run_lmtrain(bf16_run(dir, "two", 12, 4, "--nproc 2"));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto a = losses(dir / "one"), b = losses(dir / "two");
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 12u);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(std::stod(a[i]) - std::stod(b[i])));
  std::cout << "[ note     ] bf16, 2 processes x 4 vs 1 x 8: largest loss difference over 12 steps " << worst << std::endl;
  EXPECT_LT(worst, 1e-3);
  EXPECT_NE(two.output.find("2 ranks hold identical weights at step 12"), std::string::npos) << two.output;
}

}  // namespace lm::test

namespace lm::test {

// sample, embed and inspect probs take --precision: bf16 products read weight copies, the log says which
// precision and why, the greedy text and the vectors stay close to fp32's, and a bad value is refused.
TEST(Bf16, TheReadingCommandsTakeAPrecision) {
  SKIP_WITHOUT_BF16();
  ScratchDir dir("bf16-read");
  RunSpec spec;
  spec.train = "batch_size: 4, max_steps: 8, warmup_steps: 1, eval_every: 0, log_every: 4";
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ck = (dir / "run").string();
  const std::string greedy = " --prompt 'In the beginning' --generate 12 --temperature 0 --rows 3";
  auto fp32 = run_lmtrain("sample --checkpoint " + ck + greedy + " --precision fp32");
  auto bf16 = run_lmtrain("sample --checkpoint " + ck + greedy + " --precision bf16");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  EXPECT_EQ(fp32.output.find("precision fp32"), std::string::npos) << "an explicit fp32 is not logged\n" << fp32.output;
  EXPECT_NE(bf16.output.find("precision bf16 (--precision bf16)"), std::string::npos) << bf16.output;
  auto automatic = run_lmtrain("sample --checkpoint " + ck + greedy);
  ASSERT_EQ(automatic.exit_code, 0) << automatic.output;
  EXPECT_NE(automatic.output.find("(auto: this CPU's bf16 products"), std::string::npos) << automatic.output;
  // The sample's text: the line after "sample 1 of 1"; the tiny model's greedy text may part where two
  // pieces are within bf16's rounding of each other, so only its start is compared.
  auto text_of = [](const std::string& out) {
    const size_t at = out.find("sample 1 of 1");
    return at == std::string::npos ? std::string() : out.substr(out.find('\n', at) + 1, 16);
  };
  EXPECT_FALSE(text_of(fp32.output).empty()) << fp32.output;
  EXPECT_EQ(text_of(fp32.output), text_of(bf16.output)) << fp32.output << bf16.output;

  const fs::path a = dir / "a.npy", b = dir / "b.npy";
  ASSERT_EQ(run_lmtrain("embed --checkpoint " + ck + " --text 'In the beginning' --text 'and the earth' --out " +
                        a.string() + " --precision fp32").exit_code, 0);
  auto e = run_lmtrain("embed --checkpoint " + ck + " --text 'In the beginning' --text 'and the earth' --out " +
                       b.string() + " --precision bf16");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(slurp(a), slurp(b)) << "bf16 products gave the same bytes as fp32";

  auto probs = run_lmtrain("inspect probs --checkpoint " + ck + " --text 'In the beginning'");
  ASSERT_EQ(probs.exit_code, 0) << probs.output;
  EXPECT_EQ(probs.output.find("precision"), std::string::npos) << "inspect defaults to fp32, unsaid\n" << probs.output;
  auto probs16 = run_lmtrain("inspect probs --checkpoint " + ck + " --text 'In the beginning' --precision bf16");
  ASSERT_EQ(probs16.exit_code, 0) << probs16.output;
  EXPECT_NE(probs16.output.find("precision bf16 (--precision bf16)"), std::string::npos) << probs16.output;
  auto bad = run_lmtrain("sample --checkpoint " + ck + " --precision fp16");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--precision"), std::string::npos) << bad.output;
}

}  // namespace lm::test
