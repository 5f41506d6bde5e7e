// Devices and precision: run.device / run.precision as config, bf16 products on fp32 master weights
// (checked on the CPU here), the fused attention of LibTorch >= 2.0 against the reference path, and, where
// LibTorch sees a GPU, CUDA against the CPU. Tests that need CUDA (or LibTorch 2) skip with the reason.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cmath>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "model/attention.h"
#include "model/gpt.h"
#include "test_util.h"
#include "util/device.h"
#include "util/errors.h"

namespace lm::test {

namespace {

std::string config_error(const std::string& yaml) {
  try {
    config::parse_config(yaml, "test.yaml", {});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

#define SKIP_WITHOUT_CUDA()                                                               \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA GPU: LibTorch sees none" \
                                                 << " (this is expected on CPU-only machines and in CI)"

}  // namespace

TEST(Device, SpecsAndPrecisionsAreCheckedAsConfig) {
  const std::string gpu = config_error("run: {device: gpu}");  // "run.device (where): expected ..."
  EXPECT_NE(gpu.find("run.device ("), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("expected auto | cpu | cuda | cuda:N, got 'gpu'"), std::string::npos) << gpu;
  EXPECT_EQ(util::to_string(util::parse_device("cuda:3")), "cuda:3");
  EXPECT_EQ(util::parse_device("cuda").index, -1);
  EXPECT_NE(config_error("run: {device: 'cuda:x'}").find("run.device"), std::string::npos);
  EXPECT_NE(config_error("run: {precision: fp16}").find("run.precision"), std::string::npos);
  EXPECT_EQ(config_error("run: {device: 'cuda:1', precision: bf16}").find("run.device"), std::string::npos);
  EXPECT_TRUE(util::resolve_device(util::parse_device("cpu")).is_cpu());
  EXPECT_EQ(util::resolve_device(util::parse_device("auto")).is_cuda(), torch::cuda::is_available());
  EXPECT_EQ(util::compute_dtype(util::Precision::kAuto, util::resolve_device(util::parse_device("cpu"))), torch::kFloat);
  EXPECT_EQ(util::compute_dtype(util::Precision::kBf16, util::resolve_device(util::parse_device("cpu"))), torch::kBFloat16);
  if (!torch::cuda::is_available()) {
    EXPECT_THROW(util::resolve_device(util::parse_device("cuda")), ConfigError);
  }
}

TEST(Device, AMissingGpuIsRefusedBeforeTheRunDirectoryIsTouched) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU: nothing to refuse";
  ScratchDir dir("nogpu");
  const std::string train = "train -c " + write_run_config(dir, RunSpec{}).string();
  ASSERT_EQ(run_lmtrain(train).exit_code, 0);
  const std::string latest = slurp(dir / "run" / "latest");
  auto r = run_lmtrain(train + " --overwrite --set run.device=cuda");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected a CUDA GPU"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir / "run" / "latest"), latest) << "--overwrite deleted the run before the device check";
  EXPECT_EQ(run_lmtrain("ckpt verify " + (dir / "run").string()).exit_code, 0);
  r = run_lmtrain("sample --checkpoint " + (dir / "run").string() + " --device cuda:0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST(Device, Bf16ProductsStayCloseToFp32AndKeepFp32MasterWeights) {
  torch::manual_seed(3);
  model::Gpt m(tiny_config(64));
  auto x = torch::randint(64, {4, 8}, torch::kInt64), y = torch::randint(64, {4, 8}, torch::kInt64);
  const auto loss32 = m->forward(x, y);
  loss32.backward();
  std::vector<torch::Tensor> g32;
  for (auto& p : m->parameters()) g32.push_back(p.grad().clone());
  m->zero_grad();
  torch::manual_seed(3);  // the same weights, computed with bf16 products
  model::Gpt m16(tiny_config(64), model::reference_ops(torch::kBFloat16));
  const auto loss16 = m16->forward(x, y);
  EXPECT_EQ(loss16.scalar_type(), torch::kFloat);  // the loss stays fp32
  EXPECT_NEAR(loss16.item<double>(), loss32.item<double>(), 0.01 * loss32.item<double>());
  loss16.backward();
  auto params = m16->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].scalar_type(), torch::kFloat) << "parameter " << i;
    ASSERT_EQ(params[i].grad().scalar_type(), torch::kFloat) << "parameter " << i;
    const double cos = torch::cosine_similarity(params[i].grad().flatten(), g32[i].flatten(), 0).item<double>();
    if (g32[i].abs().max().item<double>() > 1e-6) {
      EXPECT_GT(cos, 0.98) << "parameter " << i;
    }
  }
  // and the fp32 model is unchanged by the other, bit for bit
  EXPECT_TRUE(torch::equal(m->forward(x, y), loss32));
}

TEST(Device, ABf16RunTrainsAndSavesFp32Weights) {
  ScratchDir dir("bf16");
  RunSpec spec;
  spec.train = "batch_size: 4, max_steps: 4, warmup_steps: 1, eval_every: 0, log_every: 1";
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string() + " --set run.precision=bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("precision bf16"), std::string::npos) << r.output;
  const auto l = losses(dir / "run");
  ASSERT_EQ(l.size(), 4u);
  for (auto& v : l) EXPECT_TRUE(std::isfinite(std::stod(v))) << v;
  auto ck = checkpoint::load_checkpoint(dir / "run");
  for (auto& [name, t] : model::named_weights(*ck.model)) EXPECT_EQ(t.scalar_type(), torch::kFloat) << name;
  EXPECT_NE(slurp(ck.dir / "config.yaml").find("precision: bf16"), std::string::npos);
}

TEST(Device, FusedAttentionMatchesTheReferenceInFp32) {
#if TORCH_VERSION_MAJOR >= 2
  torch::manual_seed(4);
  for (int64_t S : {0, 5}) {
    const int64_t T = S == 0 ? 7 : 1;  // a whole window, or one new token after S cached positions
    auto q = torch::randn({2, 3, T, 8}), k = torch::randn({2, 3, S + T, 8}), v = torch::randn({2, 3, S + T, 8});
    auto fused = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/T > 1);
    auto ref = model::attention_reference(q, k, v, torch::kFloat);
    EXPECT_LT((fused - ref).abs().max().item<double>(), 1e-5) << "S=" << S;
  }
#else
  GTEST_SKIP() << "LibTorch " << TORCH_VERSION << " has no scaled_dot_product_attention (needs >= 2.0)";
#endif
}

TEST(Device, CudaLogitsMatchTheCpuInFp32) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(5);
  auto cfg = tiny_config(128);
  cfg.max_seq_len = 16;
  model::Gpt m(cfg);
  m->eval();
  torch::NoGradGuard no_grad;
  auto x = torch::randint(128, {3, 16}, torch::kInt64);
  auto cpu = m->forward(x);
  m->to(torch::Device(torch::kCUDA, 0));
  auto gpu = m->forward(x).cpu();  // TF32 is off by default for fp32 products
  EXPECT_LT((gpu - cpu).abs().max().item<double>(), 1e-4);
}

TEST(Device, ACudaCheckpointSamplesOnTheCpuAndResumesAcrossDevices) {
  SKIP_WITHOUT_CUDA();
  ScratchDir dir("cuda");
  RunSpec spec;
  spec.train = "batch_size: 4, max_steps: 8, warmup_steps: 1, eval_every: 4, eval_batches: 2, log_every: 1";
  spec.extra = "checkpoint: {every: 4}\n";
  const std::string train = "train -c " + write_run_config(dir, spec).string();
  auto r = run_lmtrain(train + " --set run.device=cuda --set train.max_steps=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("device cuda:0"), std::string::npos) << r.output;
  r = run_lmtrain("sample --checkpoint " + (dir / "run").string() + " --device cpu --generate 8 --seed 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_lmtrain("sample --checkpoint " + (dir / "run").string() + " --device cuda --generate 8 --seed 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_lmtrain(train + " --set run.device=cpu --resume auto");  // CUDA -> CPU
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  r = run_lmtrain(train + " --set run.device=cuda --set train.max_steps=12 --resume auto");  // CPU -> CUDA
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(losses(dir / "run").size(), 12u);
}

}  // namespace lm::test
