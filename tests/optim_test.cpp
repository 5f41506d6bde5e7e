// Optimizers and the fast path: Muon's maths against a plain float64 reference, its parameter groups, its
// state through a kill and a resume, fine-tuning with it under freezing; and the loss trajectory of two BLAS
// threads (the default on 2 cores) against the plain one-thread path.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "model/make_ops.h"
#include "test_util.h"
#include "train/fused_adamw.h"
#include "train/muon.h"
#include "train/optimizer.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/threads.h"

namespace lm::test {

namespace {

// The published quintic iteration, written out in float64 with nothing shared with train/muon.cpp.
torch::Tensor reference_newton_schulz(torch::Tensor g, int steps) {
  torch::Tensor x = g.to(torch::kDouble);
  const bool tall = x.size(0) > x.size(1);
  if (tall) x = x.t();
  x = x / (std::sqrt((x * x).sum().item<double>()) + 1e-7);
  for (int i = 0; i < steps; ++i) {
    torch::Tensor a = x.mm(x.t());
    x = 3.4445 * x + (-4.7750 * a + 2.0315 * a.mm(a)).mm(x);
  }
  return tall ? x.t() : x;
}

// The same iteration as the published Muon runs it on a GPU: every product and sum in bf16.
torch::Tensor plain_bf16_newton_schulz(torch::Tensor g, int steps) {
  torch::Tensor x = g.to(torch::kFloat);
  const bool tall = x.size(0) > x.size(1);
  if (tall) x = x.t();
  x = (x / (x.norm() + 1e-7)).to(torch::kBFloat16);
  for (int i = 0; i < steps; ++i) {
    torch::Tensor a = x.mm(x.t());
    x = 3.4445 * x + (-4.7750 * a + 2.0315 * a.mm(a)).mm(x);
  }
  return (tall ? x.t() : x).to(torch::kFloat);
}

torch::Tensor singular_values(const torch::Tensor& m) { return torch::linalg_svdvals(m.to(torch::kDouble)); }

struct LoadedWeights {
  checkpoint::LoadedCheckpoint ck;
  torch::Tensor get(const std::string& name) const {
    for (auto& [n, t] : model::named_weights(*ck.model)) {
      if (n == name) return t;
    }
    ADD_FAILURE() << "no weight " << name;
    return {};
  }
};

std::string muon_run(const ScratchDir& dir, const std::string& run, const std::string& train_extra = "") {
  RunSpec spec;
  spec.run = run;
  spec.train = "batch_size: 4, max_steps: 8, warmup_steps: 1, eval_every: 0, log_every: 1, optimizer: muon" + train_extra;
  spec.extra = "checkpoint: {every: 4, keep_last: 2}\n";
  return "train -c " + write_run_config(dir, spec).string();
}

}  // namespace

TEST(Muon, NewtonSchulzOutputIsNearOrthogonal) {
  torch::manual_seed(21);
  for (auto shape : {std::vector<int64_t>{64, 256}, std::vector<int64_t>{256, 64}, std::vector<int64_t>{96, 288}}) {
    torch::Tensor g = torch::randn(shape);
    torch::Tensor o = lm::train::newton_schulz(g, 5);
    ASSERT_EQ(o.sizes(), g.sizes());
    torch::Tensor s = singular_values(o);
    // The published coefficients trade exactness for speed: every singular value lands near 1, in about
    // [0.7, 1.2], instead of converging to exactly 1.
    EXPECT_GT(s.min().item<double>(), 0.6) << shape[0] << "x" << shape[1];
    EXPECT_LT(s.max().item<double>(), 1.25) << shape[0] << "x" << shape[1];
    // ... and the result points the way of the exact orthogonal factor U V^T of g.
    auto [u, sv, vh] = torch::linalg_svd(g.to(torch::kDouble), /*full_matrices=*/false);
    torch::Tensor polar = u.mm(vh);
    const double cosine = (polar * o.to(torch::kDouble)).sum().item<double>() /
                          (polar.norm().item<double>() * o.to(torch::kDouble).norm().item<double>());
    EXPECT_GT(cosine, 0.97) << shape[0] << "x" << shape[1];
  }
  // Scale does not matter: the input is normalised first.
  torch::Tensor g = torch::randn({32, 80});
  EXPECT_TRUE(torch::allclose(lm::train::newton_schulz(g, 5), lm::train::newton_schulz(1000 * g, 5), 1e-4, 1e-5));
}

// The Gram-matrix runs (train/muon.cpp: s iterations on X X^T between two products with X) are the same
// iteration as the plain one: on the shapes of config S's qkv, fc and proj matrices, and on a nearly
// rank-deficient update (a few strong directions and small noise, as real gradients are), the result stays
// within fp32 rounding of the float64 plain iteration.
TEST(Muon, GramRunsFollowThePlainIterationOnWideMatrices) {
  torch::manual_seed(24);
  for (auto shape : {std::vector<int64_t>{768, 256}, std::vector<int64_t>{256, 1024}, std::vector<int64_t>{1024, 256},
                     std::vector<int64_t>{256, 256}}) {
    for (double noise : {1.0, 0.05, 1e-3}) {
      torch::Tensor g = torch::randn({shape[0], 8}).mm(torch::randn({8, shape[1]})) + noise * torch::randn(shape);
      const torch::Tensor ref = reference_newton_schulz(g, 5);
      const torch::Tensor got = lm::train::newton_schulz(g, 5).to(torch::kDouble);
      const double rel = (got - ref).norm().item<double>() / ref.norm().item<double>();
      EXPECT_LT(rel, 1e-4) << shape[0] << "x" << shape[1] << " noise " << noise;
      EXPECT_LT((got - ref).abs().max().item<double>(), 2e-5) << shape[0] << "x" << shape[1] << " noise " << noise;
      for (int steps : {1, 2, 3, 4}) {  // every run length and a shorter last run
        const torch::Tensor r = reference_newton_schulz(g, steps);
        EXPECT_LT((lm::train::newton_schulz(g, steps).to(torch::kDouble) - r).norm().item<double>() / r.norm().item<double>(),
                  1e-4)
            << shape[0] << "x" << shape[1] << " steps " << steps;
      }
    }
  }
}

// In bf16 (train.muon_precision, the default where the CPU multiplies bf16 in hardware) the iterations are
// as exact as the published Muon's own bf16 iteration: on config S's shapes, for a full-rank and a nearly
// rank-deficient update, the distance to the float64 iteration is within 1.5x that of the plain bf16
// iteration (measured: both ~0.03 full-rank; nearly rank-deficient ~0.1, the plain one ~0.17: the weak
// directions, grown ~3.4x a step, carry the strong ones' rounding), and the singular values lie in the same
// band.
TEST(Muon, Bf16IterationsAreAsExactAsThePublishedBf16Iteration) {
  torch::manual_seed(26);
  for (auto shape : {std::vector<int64_t>{768, 256}, std::vector<int64_t>{256, 1024}, std::vector<int64_t>{256, 256},
                     std::vector<int64_t>{64, 96}}) {
    for (double noise : {1.0, 0.05}) {
      torch::Tensor g = torch::randn({shape[0], 8}).mm(torch::randn({8, shape[1]})) + noise * torch::randn(shape);
      const torch::Tensor ref = reference_newton_schulz(g, 5);
      const torch::Tensor got = lm::train::newton_schulz(g, 5, *model::reference_ops(), torch::kBFloat16);
      ASSERT_EQ(got.scalar_type(), torch::kFloat);
      ASSERT_EQ(got.sizes(), g.sizes());
      auto distance = [&](const torch::Tensor& t) {
        return (t.to(torch::kDouble) - ref).norm().item<double>() / ref.norm().item<double>();
      };
      const double rel = distance(got), rel_plain = distance(plain_bf16_newton_schulz(g, 5));
      EXPECT_LT(rel, 1.5 * rel_plain) << shape[0] << "x" << shape[1] << " noise " << noise << " plain " << rel_plain;
      EXPECT_LT(rel, noise == 1.0 ? 0.06 : 0.15) << shape[0] << "x" << shape[1] << " noise " << noise;
      const torch::Tensor s = singular_values(got), s_ref = singular_values(ref);
      EXPECT_NEAR(s.max().item<double>(), s_ref.max().item<double>(), 0.05) << shape[0] << "x" << shape[1];
      EXPECT_GT(s.min().item<double>(), s_ref.min().item<double>() - 0.05) << shape[0] << "x" << shape[1];
    }
  }
}

// On the fused set with 2 LibTorch threads and OpenBLAS on one thread per call (the trainer's setting), each
// thread orthogonalises whole matrices; on one thread every matrix runs there. The parameters come out the
// same to the bit, with fp32 products (the fused set's) and with bf16 ones (oneDNN's, one thread a call).
TEST(Muon, WholeMatricesPerThreadGiveTheBitsOfOneThread) {
  const int threads = torch::get_num_threads(), blas = std::max(1, util::blas_threads());
  const torch::Device cpu(torch::kCPU);
  const model::OpsPtr fused = model::make_ops(util::Kernels::kFused, cpu, torch::kFloat, tiny_config()).ops;
  auto run = [&](int torch_threads, c10::ScalarType dtype) {
    util::set_compute_threads(torch_threads, 1);
    torch::manual_seed(25);
    std::vector<torch::Tensor> params = {torch::randn({96, 32}), torch::randn({32, 32}), torch::randn({128, 32}),
                                         torch::randn({32, 128}), torch::randn({96, 32})};
    std::vector<std::string> names;
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].set_requires_grad(true);
      names.push_back("p" + std::to_string(i));
    }
    lm::train::Muon muon(names, params, 0.02, 0.95, 5, fused, dtype);
    for (int step = 0; step < 3; ++step) {
      for (auto& p : params) p.mutable_grad() = torch::randn(p.sizes());
      muon.step();
    }
    return params;
  };
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const auto one = run(1, dtype), two = run(2, dtype);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << "parameter " << i << " " << dtype;
  }
  util::set_compute_threads(threads, blas);
}

TEST(Muon, UpdateMatchesAPlainTensorReference) {
  torch::manual_seed(22);
  const double lr = 0.02, mu = 0.95;
  std::vector<torch::Tensor> params = {torch::randn({48, 96}), torch::randn({96, 48})};
  std::vector<torch::Tensor> ref_w, ref_m;
  for (auto& p : params) {
    ref_w.push_back(p.to(torch::kDouble).clone());
    ref_m.push_back(torch::zeros_like(ref_w.back()));
    p.set_requires_grad(true);
  }
  lm::train::Muon muon({"a", "b"}, params, lr, mu, 5);
  for (int step = 0; step < 4; ++step) {
    const float clip = step == 2 ? 0.25f : 1.0f;  // a gradient clip's factor, applied as Muon reads the gradient
    for (size_t i = 0; i < params.size(); ++i) {
      torch::Tensor g = torch::randn(params[i].sizes());
      params[i].mutable_grad() = g.clone();
      torch::Tensor gd = g.to(torch::kDouble) * clip;
      ref_m[i] = mu * ref_m[i] + gd;
      torch::Tensor u = gd + mu * ref_m[i];
      const double scale = std::sqrt(std::max(1.0, double(params[i].size(0)) / double(params[i].size(1))));
      ref_w[i] = ref_w[i] - lr * scale * reference_newton_schulz(u, 5);
    }
    muon.step(clip);
    for (size_t i = 0; i < params.size(); ++i) {
      const double diff = (params[i].detach().to(torch::kDouble) - ref_w[i]).abs().max().item<double>();
      EXPECT_LT(diff, 1e-6) << "step " << step << " param " << i;
    }
  }
  auto state = muon.state();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_LT((state.at("a.momentum_buffer").to(torch::kDouble) - ref_m[0]).abs().max().item<double>(), 1e-5);
}

TEST(Muon, ParametersWithoutAGradientStayPutAndGetNoState) {
  torch::Tensor a = torch::randn({8, 8}).requires_grad_(), b = torch::randn({8, 8}).requires_grad_();
  const torch::Tensor b0 = b.detach().clone();
  lm::train::Muon muon({"a", "b"}, {a, b}, 0.02, 0.95, 5);
  a.mutable_grad() = torch::randn({8, 8});
  muon.step();
  EXPECT_TRUE(torch::equal(b.detach(), b0));
  EXPECT_EQ(muon.state().count("b.momentum_buffer"), 0u);
  EXPECT_EQ(muon.state().count("a.momentum_buffer"), 1u);
  EXPECT_THROW(muon.load_state({{"c.momentum_buffer", torch::zeros({8, 8})}}), lm::CheckpointError);
  EXPECT_THROW(muon.load_state({{"a.momentum_buffer", torch::zeros({8, 4})}}), lm::CheckpointError);
}

TEST(Muon, TakesTheBlocksMatricesAndLeavesTheRestToAdamW) {
  torch::manual_seed(23);
  model::Gpt m(tiny_config(64, /*tied=*/false));
  auto g = lm::train::split_decay_groups(*m, 1.0, {}, /*muon=*/true);
  auto plain = lm::train::split_decay_groups(*m);
  for (const auto& name : g.muon_names) {
    EXPECT_EQ(name.rfind("blocks.", 0), 0u) << name;
    EXPECT_NE(name.find(".weight"), std::string::npos) << name;
  }
  EXPECT_EQ(g.muon.size(), 4u * static_cast<size_t>(m->config().n_layers));  // qkv, proj, fc, proj per block
  EXPECT_EQ(g.decay_names, std::vector<std::string>{"head.weight"});
  EXPECT_EQ(g.no_decay_names, plain.no_decay_names);
  EXPECT_EQ(g.muon_numel + g.decay_numel, plain.decay_numel);
  EXPECT_TRUE(plain.muon.empty());
}

// The state survives a kill: momentum buffers are in optimizer.pt, and resuming gives the same losses and
// the same bytes as a run that never stopped.
TEST(Muon, KillAndResumeIsBitwiseIdenticalToAStraightRun) {
  ScratchDir dir("muon_resume");
  auto straight = run_lmtrain(muon_run(dir, "straight"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("muon group: 8 tensors"), std::string::npos) << straight.output;
  // train.muon_precision auto: bf16 where this CPU has bf16 instructions and a bf16 product measures at
  // least 1.3x fp32's at start-up (util::choose_precisions), and the log says which and why.
  const bool native = util::native_bf16_products(torch::Device(torch::kCPU));
  const bool bf16 = straight.output.find("steps in bf16 (auto: this CPU's bf16 products") != std::string::npos;
  EXPECT_TRUE(bf16 || straight.output.find(native ? "steps in fp32 (auto: this CPU's bf16 products"
                                                  : "steps in fp32 (auto: this CPU has no bf16 matrix instructions")
                          != std::string::npos)
      << straight.output;
  EXPECT_EQ(util::muon_dtype(util::Precision::kFp32, torch::Device(torch::kCPU)), torch::kFloat);
  // The split run in the precision the straight one measured (a CPU near the margin could measure the other).
  const std::string same = std::string(" --set train.muon_precision=") + (bf16 ? "bf16" : "fp32");
  auto killed = run_lmtrain_faults("LMTRAIN_TEST_KILL_SAVE=step_00000008:file", muon_run(dir, "split") + same);
  ASSERT_NE(killed.exit_code, 0) << killed.output;
  ASSERT_EQ(slurp(dir / "split" / "latest").substr(0, 13), "step_00000004") << killed.output;
  auto resumed = run_lmtrain(muon_run(dir, "split") + same + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(losses(dir / "split"), losses(dir / "straight"));
  EXPECT_EQ(losses(dir / "split").size(), 8u);
  const fs::path a = dir / "straight" / "step_00000008", b = dir / "split" / "step_00000008";
  EXPECT_EQ(manifest_sha(a, "model.safetensors"), manifest_sha(b, "model.safetensors"));
  EXPECT_EQ(manifest_sha(a, "optimizer.pt"), manifest_sha(b, "optimizer.pt"));
  EXPECT_NE(slurp(a / "optimizer.pt").find("blocks.0.attn.qkv.weight.momentum_buffer"), std::string::npos);

  // A checkpoint trained with Muon does not resume under AdamW (its momentum has nowhere to go), and back.
  auto other = run_lmtrain(muon_run(dir, "split") + " --set train.optimizer=adamw --set train.max_steps=12 --resume auto");
  EXPECT_EQ(other.exit_code, 4) << other.output;
  EXPECT_NE(other.output.find("holds Muon momentum"), std::string::npos) << other.output;
  ASSERT_EQ(run_lmtrain(muon_run(dir, "plain") + " --set train.optimizer=adamw").exit_code, 0);
  auto back = run_lmtrain(muon_run(dir, "plain") + " --set train.max_steps=12 --resume auto");
  EXPECT_EQ(back.exit_code, 4) << back.output;
  EXPECT_NE(back.output.find("is AdamW's, but this run does not step it with AdamW"), std::string::npos) << back.output;
}

TEST(Muon, FineTuningWithMuonStillFreezes) {
  ScratchDir dir("muon_ft");
  RunSpec pre;
  pre.run = "pre";
  ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, pre).string()).exit_code, 0);
  RunSpec ft;
  ft.run = "ft";
  ft.train_text = "tiny_en_val.txt";
  ft.tokenizer = ft.model = "";
  ft.train = "batch_size: 4, max_steps: 5, warmup_steps: 1, eval_every: 0, optimizer: muon";
  ft.extra = "finetune: {freeze_embeddings: true, freeze: [blocks.0.]}\n";
  auto r = run_lmtrain("finetune --from " + (dir / "pre").string() + " -c " + write_run_config(dir, ft).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("frozen tensors unchanged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("muon group: 4 tensors"), std::string::npos) << r.output;  // block 1 only
  LoadedWeights a{checkpoint::load_checkpoint(dir / "pre")}, b{checkpoint::load_checkpoint(dir / "ft")};
  EXPECT_TRUE(torch::equal(a.get("tok_emb.weight"), b.get("tok_emb.weight")));
  EXPECT_TRUE(torch::equal(a.get("blocks.0.mlp.fc.weight"), b.get("blocks.0.mlp.fc.weight")));
  EXPECT_FALSE(torch::equal(a.get("blocks.1.mlp.fc.weight"), b.get("blocks.1.mlp.fc.weight")));
}

namespace {

// One 20-step run of the same tiny config per entry of `sets` (extra command-line flags); each run's log
// and training losses.
// `envs`, when given: each run's environment changes, as `env` takes them ("-u NAME", "NAME=value").
void tiny_runs(const ScratchDir& dir, const std::vector<std::string>& sets, std::vector<std::string>& logs,
               std::vector<std::vector<std::string>>& runs, const std::vector<std::string>& envs = {}) {
  RunSpec spec;
  spec.model = "d_model: 128, n_layers: 2, n_heads: 4, max_seq_len: 32";
  spec.train = "batch_size: 8, max_steps: 20, warmup_steps: 2, eval_every: 0, log_every: 1";
  for (size_t i = 0; i < sets.size(); ++i) {
    spec.run = "run" + std::to_string(i);
    const std::string args = "train -c " + write_run_config(dir, spec).string() + " " + sets[i];
    auto r = envs.empty() ? run_lmtrain(args) : run_command("env " + envs[i] + " " + LMTRAIN_BINARY + " " + args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    logs.push_back(r.output);
    runs.push_back(losses(dir / spec.run));
  }
}

// Only float rounding may differ: the same 20 losses to 1e-4.
void expect_same_losses(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_NEAR(std::stod(a[i]), std::stod(b[i]), 1e-4) << "step " << i + 1;
}

}  // namespace

TEST(FusedAdamW, StepsAsLibTorchsAdamW) {
  // Two groups (decayed, undecayed), a parameter large enough to be cut between the threads, one without
  // a gradient (no state), per-group betas and eps, a changing lr and gradient clipping: parameters and
  // state as LibTorch's clip_grad_norm_ and step.
  struct Threads {
    int before = torch::get_num_threads();
    ~Threads() { torch::set_num_threads(before); }
  } restore;
  torch::set_num_threads(2);
  torch::manual_seed(3);
  const std::vector<std::vector<int64_t>> shapes{{300, 250}, {7, 5}, {250}, {13}};
  std::vector<torch::Tensor> a, b;
  for (const auto& s : shapes) {
    a.push_back(torch::randn(s).requires_grad_());
    b.push_back(a.back().detach().clone().requires_grad_());
  }
  auto make = [](const std::vector<torch::Tensor>& p) {
    auto o = [](double wd, double b1, double b2, double eps) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(1e-2).weight_decay(wd).betas({b1, b2}).eps(eps));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{p[0], p[1]}, o(0.1, 0.9, 0.95, 1e-8));
    groups.emplace_back(std::vector<torch::Tensor>{p[2], p[3]}, o(0.0, 0.8, 0.99, 1e-3));
    return torch::optim::AdamW(std::move(groups), torch::optim::AdamWOptions(1e-2));
  };
  auto fused = make(a), plain = make(b);
  for (int step = 1; step <= 5; ++step) {
    for (size_t i = 0; i + 1 < a.size(); ++i) {  // the last parameter never gets a gradient
      auto g = torch::randn(a[i].sizes()) * 1e-2;
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    for (auto* o : {&fused, &plain}) {
      for (auto& group : o->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(1e-2 / step);
    }
    // gradient clipping on odd steps (the norm is ~2.7): the factor folded into the fused pass, against
    // LibTorch's clip_grad_norm_ scaling the gradients before its step
    const double max_norm = step % 2 ? 1.0 : 100.0;
    const auto clip = train::grad_clip(a, max_norm);
    EXPECT_EQ(clip.norm, torch::nn::utils::clip_grad_norm_(b, max_norm)) << "step " << step;
    EXPECT_EQ(clip.factor_value == 1.0f, step % 2 == 0) << "step " << step;
    const auto grad0 = a[0].grad().clone();
    ASSERT_TRUE(train::fused_adamw_step(fused, clip.factor_value));
    EXPECT_TRUE(torch::equal(a[0].grad(), grad0)) << "the fused step changed a gradient";
    plain.step();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE((a[i] - b[i]).abs().max().item<double>(), 1e-6) << "parameter " << i;
  }
  EXPECT_EQ(fused.state().size(), 3u);  // the parameter without a gradient has no state, as in LibTorch
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    const auto& sa = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(checkpoint::state_key(fused.state(), a[i])));
    const auto& sb = static_cast<torch::optim::AdamWParamState&>(*plain.state().at(checkpoint::state_key(plain.state(), b[i])));
    EXPECT_EQ(sa.step(), sb.step());
    EXPECT_LE((sa.exp_avg() - sb.exp_avg()).abs().max().item<double>(), 1e-7) << "exp_avg " << i;
    EXPECT_LE((sa.exp_avg_sq() - sb.exp_avg_sq()).abs().max().item<double>(), 1e-9) << "exp_avg_sq " << i;
  }
  // amsgrad is not fused: nothing is changed and the caller is told to step LibTorch's way.
  for (auto& group : fused.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).amsgrad(true);
  const auto before = a[0].detach().clone();
  EXPECT_FALSE(train::fused_adamw_step(fused));
  EXPECT_TRUE(torch::equal(a[0], before));
}

// RunOptimizer::step with a clipping factor, on every path (the fused AdamW pass, LibTorch's AdamW, and
// Muon beside either): the parameters clip_grad_norm_ followed by a plain step gives, exactly.
TEST(FusedAdamW, ClippedStepsEqualClipGradNormThenStep) {
  const torch::Device cpu(torch::kCPU);
  for (const bool muon : {false, true}) {
    for (const auto kernels : {util::Kernels::kFused, util::Kernels::kReference}) {
      const model::ExecutionPlan plan = model::make_ops(kernels, cpu, torch::kFloat, tiny_config());
      const model::OpsPtr& ops = plan.ops;
      torch::manual_seed(31);
      model::Gpt ours(tiny_config(), ops), theirs(tiny_config(), ops);
      {
        torch::NoGradGuard no_grad;
        for (auto& item : theirs->named_parameters()) item.value().copy_(ours->named_parameters()[item.key()]);
      }
      train::TrainConfig tc;
      tc.optimizer = muon ? train::OptimizerKind::kMuon : train::OptimizerKind::kAdamW;
      const auto ours_groups = train::split_decay_groups(*ours, 1.0, {}, muon);
      const auto theirs_groups = train::split_decay_groups(*theirs, 1.0, {}, muon);
      train::RunOptimizer ours_opt(ours_groups, tc, plan), theirs_opt(theirs_groups, tc, plan);
      for (int step = 1; step <= 3; ++step) {
        for (auto& item : ours->named_parameters()) {
          const auto g = torch::randn(item.value().sizes()) * (step == 2 ? 1e-4 : 1.0);  // step 2: under the clip norm
          item.value().mutable_grad() = g.clone();
          theirs->named_parameters()[item.key()].mutable_grad() = g.clone();
        }
        const auto clip = train::grad_clip(ours_groups.all(), 1.0);
        EXPECT_EQ(clip.norm, torch::nn::utils::clip_grad_norm_(theirs_groups.all(), 1.0));
        EXPECT_EQ(clip.factor_value == 1.0f, step == 2);
        ours_opt.step(clip);
        theirs_opt.step();
      }
      for (auto& item : ours->named_parameters()) {
        EXPECT_TRUE(torch::equal(item.value(), theirs->named_parameters()[item.key()]))
            << item.key() << (muon ? " muon" : " adamw") << " " << ops->name();
      }
    }
  }
}

// The default BLAS pool (every core) against the plain one-thread path: the same losses to 1e-4 for the
// first 20 steps (only the summation order inside the matrix products may differ).
TEST(FastPath, TwoBlasThreadsFollowTheOneThreadLosses) {
  ScratchDir dir("blas_threads");
  std::vector<std::string> logs;
  std::vector<std::vector<std::string>> runs;
  ASSERT_NO_FATAL_FAILURE(tiny_runs(dir, {"--set run.kernels=plain --set run.blas_threads=1",
                                          "--set run.kernels=plain --set run.blas_threads=2"}, logs, runs));
  EXPECT_NE(logs[0].find("1 BLAS thread,"), std::string::npos) << logs[0];
  EXPECT_NE(logs[1].find("2 BLAS threads,"), std::string::npos) << logs[1];
  expect_same_losses(runs[0], runs[1]);
}

// The fused set (run.kernels fused; auto's choice on a CPU) against the reference set, through the binary:
// the first 20 losses from a fixed seed within 1e-4; the log says which set ran and why.
TEST(FastPath, FusedKernelsFollowThePlainLosses) {
  ScratchDir dir("kernels");
  std::vector<std::string> logs;
  std::vector<std::vector<std::string>> runs;
  ASSERT_NO_FATAL_FAILURE(tiny_runs(dir, {"--set run.kernels=reference --set run.blas_threads=2",
                                          "--set run.kernels=auto --set run.blas_threads=2"}, logs, runs));
  EXPECT_NE(logs[0].find("(reference ops, OpenBLAS 2)"), std::string::npos) << logs[0];
  EXPECT_NE(logs[0].find("reference ops (run.kernels reference)"), std::string::npos) << logs[0];
  EXPECT_NE(logs[1].find("(fused ops, OpenBLAS 1)"), std::string::npos) << logs[1];
  EXPECT_NE(logs[1].find("fused ops (run.kernels auto): CPU, float32"), std::string::npos) << logs[1];
  expect_same_losses(runs[0], runs[1]);
  EXPECT_NE(std::stod(runs[0][0]), std::stod(runs[0][19])) << "the loss never moved";
}

// OpenBLAS's kernels (its OPENBLAS_CORETYPE, or its own choice for the CPU) change only the rounding: the
// same 20 losses to 1e-4 with its AVX2 (Haswell) kernels and with whatever it picks itself; the log names
// the kernels that ran.
TEST(FastPath, BlasKernelsChangeOnlyTheRounding) {
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx2 = false;
#endif
  if (!avx2) GTEST_SKIP() << "OpenBLAS's Haswell kernels need an x86 CPU with AVX2 and FMA";
  ScratchDir dir("blas_core");
  std::vector<std::string> logs;
  std::vector<std::vector<std::string>> runs;
  ASSERT_NO_FATAL_FAILURE(tiny_runs(dir, {"", ""}, logs, runs, {"OPENBLAS_CORETYPE=Haswell", "-u OPENBLAS_CORETYPE"}));
  EXPECT_NE(logs[0].find(", OpenBLAS kernels Haswell (OPENBLAS_CORETYPE from the environment)"), std::string::npos) << logs[0];
  const size_t at = logs[1].find(", OpenBLAS kernels ");
  ASSERT_NE(at, std::string::npos) << logs[1];
  std::cout << "[ note     ] lmtrain's choice here:" << logs[1].substr(at + 18, logs[1].find(')', at) - at - 17) << std::endl;
  expect_same_losses(runs[0], runs[1]);
}

}  // namespace lm::test
