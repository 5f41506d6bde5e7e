// The recipe's architecture options (docs/recipe.md): rotary positions against their formula and their
// relative-offset property, causality with every option on, the init keys, and each option's forward
// through the binary against an independent Python forward (scripts/check_forward.py).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/positions.h"
#include "test_util.h"

namespace lm::test {

namespace {

model::GptConfig every_option(model::Positions pos = model::Positions::kRope) {
  model::GptConfig c = tiny_config(64, true, pos);
  c.d_model = 32;
  c.n_heads = 4;
  c.max_seq_len = 16;
  c.qk_norm = true;
  c.mlp_activation = model::MlpActivation::kRelu2;
  c.bias = false;
  c.logit_softcap = 3.0;
  c.rope_base = 100.0;
  return c;
}

}  // namespace

// rotate_half: pair (x[i], x[i + D/2]) turned by p * base^(-2i/D), written out element by element.
TEST(Rope, RotateHalfIsTheDirectFormula) {
  torch::manual_seed(1);
  const int64_t T = 7, D = 8, offset = 3;
  const double base = 10000.0;
  const auto x = torch::randn({2, T, D}, torch::kFloat64);
  auto [c, s] = model::rotary_tables(T, D, base, offset);
  const auto got = model::rotate_half(x, c.to(torch::kFloat64), s.to(torch::kFloat64));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < D / 2; ++i) {
        const double angle = static_cast<double>(offset + t) * std::pow(base, -2.0 * static_cast<double>(i) / D);
        const double a = x[b][t][i].item<double>(), bb = x[b][t][i + D / 2].item<double>();
        EXPECT_NEAR(got[b][t][i].item<double>(), a * std::cos(angle) - bb * std::sin(angle), 1e-6);
        EXPECT_NEAR(got[b][t][i + D / 2].item<double>(), bb * std::cos(angle) + a * std::sin(angle), 1e-6);
      }
    }
  }
  // a rotation keeps the norm
  EXPECT_TRUE(torch::allclose(got.norm(2, -1), x.norm(2, -1), 1e-6, 1e-6));
}

// q rotated to position p and k to position s score the same for every pair with the same offset p - s.
TEST(Rope, ScoresDependOnlyOnTheOffset) {
  torch::manual_seed(2);
  const int64_t D = 16;
  const auto q = torch::randn({1, D}, torch::kFloat64), k = torch::randn({1, D}, torch::kFloat64);
  auto score = [&](int64_t p, int64_t s) {
    auto [cp, sp] = model::rotary_tables(1, D, 10000.0, p);
    auto [cs, ss] = model::rotary_tables(1, D, 10000.0, s);
    const auto rq = model::rotate_half(q, cp.to(torch::kFloat64), sp.to(torch::kFloat64));
    const auto rk = model::rotate_half(k, cs.to(torch::kFloat64), ss.to(torch::kFloat64));
    return rq[0].dot(rk[0]).item<double>();
  };
  for (int64_t offset : {0, 1, 5, 40}) {
    const double at_start = score(offset, 0);
    for (int64_t s : {1, 17, 300, 5000}) EXPECT_NEAR(score(s + offset, s), at_start, 1e-4) << "offset " << offset;
  }
  EXPECT_GT(std::abs(score(5, 0) - score(0, 0)), 1e-3) << "the offset changes the score";
}

// With every option on, position t's logits depend on tokens 0..t only.
TEST(Rope, EveryOptionKeepsTheModelCausal) {
  torch::manual_seed(3);
  model::Gpt m(every_option());
  torch::NoGradGuard no_grad;
  auto x = torch::randint(64, {2, 16});
  const auto before = m->forward(x);
  x.index_put_({torch::indexing::Slice(), torch::indexing::Slice(9, 16)}, torch::randint(64, {2, 7}));
  const auto after = m->forward(x);
  EXPECT_TRUE(torch::allclose(before.narrow(1, 0, 9), after.narrow(1, 0, 9), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(before.narrow(1, 9, 7), after.narrow(1, 9, 7)));
  EXPECT_LE(after.abs().max().item<double>(), 3.0) << "soft-capped logits stay within the cap";
}

// The init keys: zero-initialised projections, the stds, and biases gone; no other tensor's bits change.
TEST(Recipe, InitKeysSetWhatTheySayAndLeaveTheRestAlone) {
  model::GptConfig plain = tiny_config(64);
  plain.d_model = 64;
  model::GptConfig tuned = plain;
  tuned.zero_init_proj = true;
  torch::manual_seed(4);
  model::Gpt a(plain);
  torch::manual_seed(4);
  model::Gpt b(tuned);
  for (auto& [name, t] : model::named_weights(*b)) {
    const bool proj = name.find("attn.proj.weight") != std::string::npos || name.find("mlp.proj.weight") != std::string::npos;
    if (proj) {
      EXPECT_EQ(t.abs().max().item<double>(), 0.0) << name;
    } else {
      EXPECT_TRUE(torch::equal(t, a->named_parameters()[name])) << name << " changed";
    }
  }
  model::GptConfig wide = plain;
  wide.vocab_size = 4096;
  wide.init_std = 0.05;
  wide.embedding_init_std = 0.3;
  wide.bias = false;
  torch::manual_seed(5);
  model::Gpt c(wide);
  EXPECT_NEAR(c->tok_emb->weight.std().item<double>(), 0.3, 0.01);
  EXPECT_NEAR(c->pos_emb->named_parameters()["weight"].std().item<double>(), 0.3, 0.02);
  auto* blk = c->blocks[0]->as<model::BlockImpl>();
  EXPECT_NEAR(blk->attn->qkv->weight.std().item<double>(), 0.05, 0.003);
  EXPECT_NEAR(blk->mlp->proj->weight.std().item<double>(), 0.05 / std::sqrt(2.0 * 2), 0.003);
  for (auto& [name, t] : model::named_weights(*c)) {
    if (name.find("ln") == std::string::npos) {
      EXPECT_EQ(name.find(".bias"), std::string::npos) << name;
    }
  }
}

// Each option's forward through the binary (train, then `inspect probs --json`) against the independent
// Python forward written from the docs, to 1e-5 in every probability.
TEST(Recipe, EveryOptionMatchesAnIndependentPythonForward) {
  ScratchDir dir("recipe_forward");
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"rope", "positions: rope"},
      {"rope_base", "positions: rope, rope_base: 50"},
      {"qk_norm", "qk_norm: true"},
      {"relu2", "mlp_activation: relu2"},
      {"no_bias", "bias: false"},
      {"softcap", "logit_softcap: 2"},
      {"together", "positions: rope, qk_norm: true, mlp_activation: relu2, bias: false, zero_init_proj: true, "
                   "logit_softcap: 2, tie_embeddings: false"},
  };
  for (const auto& [name, keys] : variants) {
    RunSpec spec;
    spec.run = name;
    spec.model += ", " + keys;
    spec.train = "batch_size: 4, max_steps: 6, warmup_steps: 1, lr: 0.01, eval_every: 0";
    auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    const fs::path ckpt = dir / name / "step_00000006";
    r = run_lmtrain("inspect probs --checkpoint " + ckpt.string() + " --text 'The river flows to the sea' --json -k 5");
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    const fs::path json = dir / (name + ".json");
    std::ofstream(json) << r.output.substr(r.output.find('['));
    r = run_command("/usr/bin/python3 " + std::string(LMTRAIN_SOURCE_DIR) + "/scripts/check_forward.py " +
                    ckpt.string() + " " + json.string());
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.output;
    EXPECT_NE(r.output.find("max |p_python - p_lmtrain|"), std::string::npos) << r.output;
  }
}

namespace {

constexpr const char* kEveryOption = "positions: rope, qk_norm: true, mlp_activation: relu2, bias: false, "
                                     "zero_init_proj: true, logit_softcap: 15";

// `train` of 12 steps of a tiny model with `model_keys` and `train_keys` added, checkpoints every 4, B
// sequences per process.
std::string recipe_args(const ScratchDir& dir, const std::string& run, const std::string& model_keys,
                        const std::string& train_keys, int batch, const std::string& more = "") {
  RunSpec spec;
  spec.run = run;
  spec.model += ", " + model_keys;
  spec.train = "batch_size: " + std::to_string(batch) + ", max_steps: 12, warmup_steps: 2, lr: 0.01, eval_every: 0, " +
               "log_every: 1" + train_keys;
  spec.extra = "checkpoint: {every: 4, keep_last: 2}\n";
  return "train -c " + write_run_config(dir, spec).string() + " --set dist.timeout_s=10 " + more;
}

// A SIGTERM and --resume auto give the straight run's weights bit for bit, two processes of 4 sequences
// follow one of 8, and a fine-tune with the token table frozen keeps it bit for bit, then samples.
void resumes_splits_and_freezes(const std::string& model_keys, const std::string& train_keys) {
  ScratchDir dir("recipe_runs");
  auto args = [&](const std::string& run, int batch, const std::string& more = "") {
    return recipe_args(dir, run, model_keys, train_keys, batch, more);
  };
  auto straight = run_lmtrain(args("straight", 8));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("fused ops (run.kernels auto)"), std::string::npos) << straight.output;

  const pid_t pid = spawn_lmtrain(args("split", 8), dir / "split1.log", hold_at(dir, "step:6"));
  ASSERT_TRUE(held(dir, "step:6")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  auto resumed = run_lmtrain(args("split", 8, "--resume auto"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(losses(dir / "split"), losses(dir / "straight"));
  const fs::path a = dir / "straight" / "step_00000012", b = dir / "split" / "step_00000012";
  EXPECT_EQ(manifest_sha(a, "model.safetensors"), manifest_sha(b, "model.safetensors"));
  EXPECT_FALSE(manifest_sha(a, "model.safetensors").empty());

  // Two processes sum their gradients in another order than one process does: the losses differ in fp32's
  // last bits (1e-5). Muon's Newton-Schulz iterations in bf16 (train.muon_precision auto on a CPU with bf16
  // products) round those differences to bf16 and carry them on, chaotically: up to 8e-4 nats within 12
  // steps here. So with bf16 the split is checked to the fp32 bound with the iterations in fp32, and the
  // bf16 runs only to 2e-3.
  auto split_matches = [&](const std::string& name, const std::vector<std::string>& one_losses,
                           const std::string& more, double tolerance) {
    auto two = run_lmtrain(args(name, 4, "--nproc 2 " + more));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    const auto two_losses = losses(dir / name);
    ASSERT_EQ(one_losses.size(), two_losses.size());
    for (size_t i = 0; i < one_losses.size(); ++i) {
      EXPECT_NEAR(std::stod(one_losses[i]), std::stod(two_losses[i]), tolerance) << name << " step " << i + 1;
    }
  };
  const bool bf16 = straight.output.find("Newton-Schulz steps in bf16") != std::string::npos;
  split_matches("two", losses(dir / "straight"), "", bf16 ? 2e-3 : 1e-5);
  if (bf16) {
    const std::string fp32 = "--set train.muon_precision=fp32";
    auto straight32 = run_lmtrain(args("straight32", 8, fp32));
    ASSERT_EQ(straight32.exit_code, 0) << straight32.output;
    split_matches("two32", losses(dir / "straight32"), fp32, 1e-5);
  }

  RunSpec ft;
  ft.run = "ft";
  ft.train_text = "tiny_en_val.txt";
  ft.tokenizer = ft.model = "";  // from the checkpoint
  ft.train = "batch_size: 4, max_steps: 4, warmup_steps: 1, lr: 0.01, eval_every: 0" + train_keys;
  auto r = run_lmtrain("finetune --from " + a.string() + " -c " + write_run_config(dir, ft).string() +
                       " --set finetune.freeze_embeddings=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("frozen tensors unchanged"), std::string::npos) << r.output;
  r = run_lmtrain("sample --checkpoint " + (dir / "ft").string() + " --prompt 'The river' --generate 20 --extend-positions");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace

TEST(Recipe, EveryOptionResumesBitwiseSplitsOverProcessesAndFreezes) { resumes_splits_and_freezes(kEveryOption, ""); }

// configs/kjv-modern.yaml's recipe, read from the file (its model keys other than the sizes, and its
// optimizer keys), on the tiny model: the same checks.
TEST(Recipe, KjvModernResumesBitwiseSplitsOverProcessesAndFreezes) {
  const YAML::Node cfg = YAML::LoadFile(std::string(LMTRAIN_SOURCE_DIR) + "/configs/kjv-modern.yaml");
  std::string model_keys, train_keys;
  for (const char* key : {"positions", "rope_base", "qk_norm", "mlp_activation", "bias", "init_std", "embedding_init_std",
                          "zero_init_proj", "logit_softcap", "tie_embeddings"}) {
    if (cfg["model"][key]) model_keys += (model_keys.empty() ? "" : ", ") + std::string(key) + ": " + cfg["model"][key].as<std::string>();
  }
  for (const char* key : {"optimizer", "muon_lr", "muon_momentum", "muon_ns_steps", "muon_precision"}) {
    if (cfg["train"][key]) train_keys += ", " + std::string(key) + ": " + cfg["train"][key].as<std::string>();
  }
  ASSERT_NE(model_keys.find("positions: rope"), std::string::npos) << model_keys;
  resumes_splits_and_freezes(model_keys, train_keys);
}

}  // namespace lm::test
