// Sampling: probabilities are a distribution, tables are sorted, generation is reproducible; lr schedule.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(Sample, GenerationIsReproducibleWithASeed) {
  auto m = tiny_model();
  sample::GenerateOptions o;
  o.max_new_tokens = 20;
  o.temperature = 1.0;
  o.top_k = 10;
  o.seed = 42;
  auto a = sample::generate(*m, {2, 7}, o);
  auto b = sample::generate(*m, {2, 7}, o);
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b);
  o.seed = 43;
  EXPECT_NE(sample::generate(*m, {2, 7}, o), a);
  o.temperature = -1;
  EXPECT_THROW(sample::generate(*m, {2, 7}, o), ConfigError);
}

TEST(Sample, GreedyPicksTheArgmax) {
  auto m = tiny_model();
  sample::GenerateOptions o;
  o.max_new_tokens = 1;
  o.temperature = 0.0;
  auto ids = sample::generate(*m, {2, 7, 9}, o);
  auto p = sample::next_token_probs(*m, {2, 7, 9});
  EXPECT_EQ(ids[0], p.argmax().item<int64_t>());
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
