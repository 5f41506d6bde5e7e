// Sampling: probabilities are a distribution, tables are sorted, generation is reproducible; lr schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "sample/sampler.h"
#include "test_util.h"
#include "train/lr_schedule.h"
#include "util/errors.h"

namespace lm::test {

namespace {
model::Gpt tiny_model() {
  torch::manual_seed(20);
  return model::Gpt(tiny_config(128));
}
}  // namespace

TEST(Sample, ProbabilitiesAreNonNegativeAndSumToOne) {
  auto m = tiny_model();
  auto p = sample::next_token_probs(*m, {2, 5, 9, 11, 3, 4, 5, 6, 7, 8, 9});  // longer than T: cropped
  EXPECT_EQ(p.size(0), 128);
  EXPECT_GE(p.min().item<double>(), 0.0);
  EXPECT_NEAR(p.sum().item<double>(), 1.0, 1e-5);
}

TEST(Sample, TopKTableIsSortedAndNamesPieces) {
  auto m = tiny_model();
  tokenizer::Tokenizer tok(english_tokenizer_path());
  auto rows = sample::top_k(sample::next_token_probs(*m, sample::prompt_context(tok, "The river")), 10, tok);
  ASSERT_EQ(rows.size(), 10u);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].prob, rows[i].prob);
  EXPECT_EQ(rows[0].rank, 1);
  EXPECT_EQ(rows[0].piece, tok.piece(rows[0].id));
  EXPECT_THROW(sample::top_k(torch::ones({4}) / 4, 5, tok), ConfigError);
}

static std::vector<int32_t> ids_of(model::GptImpl& m, const std::vector<int32_t>& ctx, const sample::GenerateOptions& o) {
  return sample::generate(m, ctx, o).front().ids;
}

TEST(Sample, GenerationIsReproducibleWithASeed) {
  auto m = tiny_model();
  sample::GenerateOptions o;
  o.max_new_tokens = 20;
  o.temperature = 1.0;
  o.top_k = 10;
  o.seed = 42;
  auto a = ids_of(*m, {2, 7}, o);
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(ids_of(*m, {2, 7}, o), a);
  // sample i of a call uses seed + i
  auto three = sample::generate(*m, {2, 7}, o, 3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].ids, a);
  o.seed = 44;
  EXPECT_EQ(ids_of(*m, {2, 7}, o), three[2].ids);
  EXPECT_NE(three[1].ids, a);
  o.temperature = -1;
  try {
    ids_of(*m, {2, 7}, o);
    ADD_FAILURE() << "temperature -1 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected >= 0, got -1"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("-1.000000"), std::string::npos) << "a number not as written: " << e.what();
  }
  o.temperature = 1;
  o.top_p = 0;
  EXPECT_THROW(ids_of(*m, {2, 7}, o), ConfigError);
  o.top_p = 1.5;
  EXPECT_THROW(ids_of(*m, {2, 7}, o), ConfigError);
}

TEST(Sample, GreedyPicksTheArgmax) {
  auto m = tiny_model();
  sample::GenerateOptions o;
  o.max_new_tokens = 1;
  o.temperature = 0.0;
  auto ids = ids_of(*m, {2, 7, 9}, o);
  auto p = sample::next_token_probs(*m, {2, 7, 9});
  EXPECT_EQ(ids[0], p.argmax().item<int64_t>());
}

// The acceptance test of the KV cache: every step of a 64-token generation draws from the same logits
// (to 1e-5) as a full recompute of the window; the window slides several times on the way (T=16).
TEST(Sample, CachedLogitsEqualFullRecomputeForEveryStep) {
  for (auto pos : {model::Positions::kLearned, model::Positions::kSinusoidal, model::Positions::kRope}) {
    for (bool extend : {false, true}) {
      if (extend && pos == model::Positions::kLearned) continue;
      torch::manual_seed(21);
      auto cfg = tiny_config(128, true, pos);
      cfg.max_seq_len = 16;
      if (pos == model::Positions::kRope) {  // with the other options that touch attention and the head
        cfg.qk_norm = true;
        cfg.logit_softcap = 2.0;
      }
      model::Gpt m(cfg);
      sample::GenerateOptions o;
      o.max_new_tokens = 64;
      o.temperature = 0.8;
      o.top_k = 50;
      o.seed = 5;
      o.extend_positions = extend;
      std::vector<torch::Tensor> cached, full;
      o.on_logits = [&](int64_t, const torch::Tensor& l) { cached.push_back(l.clone()); };
      auto a = sample::generate(*m, {2, 7, 9, 11, 3}, o).front();
      o.use_cache = false;
      o.on_logits = [&](int64_t, const torch::Tensor& l) { full.push_back(l.clone()); };
      auto b = sample::generate(*m, {2, 7, 9, 11, 3}, o).front();
      ASSERT_EQ(a.ids, b.ids);
      ASSERT_EQ(cached.size(), 64u);
      ASSERT_EQ(full.size(), 64u);
      for (size_t i = 0; i < 64; ++i) {
        EXPECT_LT((cached[i] - full[i]).abs().max().item<double>(), 1e-5) << "step " << i;
      }
      EXPECT_EQ(a.window_slides, extend ? 0 : 6);  // 5 + 63 tokens through a 16-token window keeping 8
      // and the full recompute is the model's plain forward over that window
      if (!extend) continue;
      std::vector<int64_t> all = {2, 7, 9, 11, 3};
      all.insert(all.end(), a.ids.begin(), a.ids.end() - 1);
      torch::NoGradGuard no_grad;
      auto logits = m->forward(torch::tensor(all).unsqueeze(0));  // (1, 68, V): positions past T=16
      EXPECT_LT((logits[0][-1].to(torch::kFloat64) - cached[63]).abs().max().item<double>(), 1e-5);
    }
  }
}

TEST(Sample, TopPKeepsTheSmallestSetReachingP) {
  auto m = tiny_model();
  auto p = sample::next_token_probs(*m, {2, 7});
  auto [sorted, order] = p.sort(0, true);
  sample::GenerateOptions o;
  o.max_new_tokens = 1;
  o.top_p = sorted[0].item<double>() * 0.5;  // only the most likely token reaches it
  for (uint64_t seed = 0; seed < 20; ++seed) {
    o.seed = seed;
    EXPECT_EQ(ids_of(*m, {2, 7}, o)[0], order[0].item<int64_t>());
  }
  o.top_p = (sorted[0] + sorted[1]).item<double>() - 1e-9;  // the top two
  std::set<int32_t> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    o.seed = seed;
    seen.insert(ids_of(*m, {2, 7}, o)[0]);
  }
  EXPECT_EQ(seen, (std::set<int32_t>{static_cast<int32_t>(order[0].item<int64_t>()), static_cast<int32_t>(order[1].item<int64_t>())}));
}

TEST(Sample, StopsAtEndOfTextOrAStopCondition) {
  auto m = tiny_model();
  sample::GenerateOptions o;
  o.max_new_tokens = 30;
  o.temperature = 0.0;
  auto free_run = ids_of(*m, {2, 7}, o);
  o.stop_id = free_run[3];
  auto s = sample::generate(*m, {2, 7}, o).front();
  EXPECT_EQ(s.stop, sample::StopReason::kEndOfText);
  EXPECT_EQ(s.ids.back(), free_run[3]);
  EXPECT_LE(s.ids.size(), 4u);
  o.stop_id = -1;
  o.stop_when = [](const std::vector<int32_t>& ids) { return ids.size() == 5; };
  s = sample::generate(*m, {2, 7}, o).front();
  EXPECT_EQ(s.stop, sample::StopReason::kStopString);
  EXPECT_EQ(s.ids.size(), 5u);
}

TEST(Sample, APromptLongerThanTheContextKeepsItsEndOrIsRejected) {
  int64_t dropped = 0;
  EXPECT_EQ(sample::fit_prompt({1, 2, 3, 4, 5}, 3, false, dropped), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(dropped, 2);
  EXPECT_THROW(sample::fit_prompt({1, 2, 3, 4, 5}, 3, true, dropped), ConfigError);
  EXPECT_EQ(sample::fit_prompt({1, 2, 3}, 3, true, dropped).size(), 3u);
  EXPECT_EQ(dropped, 0);
  auto m = tiny_model();  // T=8
  sample::GenerateOptions o;
  EXPECT_THROW(sample::generate(*m, std::vector<int32_t>(9, 3), o), ConfigError);
  o.extend_positions = true;  // learned positions cannot extend
  EXPECT_THROW(sample::generate(*m, {2, 7}, o), ConfigError);
}

TEST(LrSchedule, WarmupThenCosineToMinLr) {
  train::TrainConfig c;
  c.lr = 1e-3;
  c.min_lr = 1e-4;
  c.warmup_steps = 10;
  c.max_steps = 110;
  EXPECT_DOUBLE_EQ(train::lr_at(0, c), 1e-4);
  EXPECT_DOUBLE_EQ(train::lr_at(9, c), 1e-3);
  EXPECT_DOUBLE_EQ(train::lr_at(10, c), 1e-3);
  EXPECT_NEAR(train::lr_at(60, c), 5.5e-4, 1e-12);  // halfway: (lr + min_lr) / 2
  EXPECT_NEAR(train::lr_at(110, c), 1e-4, 1e-12);
  c.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(train::lr_at(0, c), 1e-3);
}

}  // namespace lm::test
