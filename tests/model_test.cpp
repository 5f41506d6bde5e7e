// Model contract: shapes, causality, tied storage, positions, GPT-2 init (loss ~ ln V), learning.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "model/gpt.h"
#include "test_util.h"
#include "train/optimizer.h"

namespace lm::test {

namespace {
model::GptConfig tiny(bool tied = true, model::Positions pos = model::Positions::kLearned) {
  return tiny_config(64, tied, pos);
}
// Mean cross-entropy of whole logits (B,T,V) against targets (B,T): the textbook loss forward(x, y) equals.
torch::Tensor full_logits_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}
}  // namespace

TEST(Model, LogitsHaveShapeBTV) {
  torch::manual_seed(0);
  model::Gpt m(tiny());
  auto x = torch::randint(0, 64, {3, 8}, torch::kInt64);
  EXPECT_EQ(m->forward(x).sizes(), (torch::IntArrayRef{3, 8, 64}));
  EXPECT_EQ(m->forward(x.narrow(1, 0, 5)).sizes(), (torch::IntArrayRef{3, 5, 64}));
}

TEST(Model, ChangingAFutureTokenLeavesEarlierLogitsUnchanged) {
  for (auto pos : {model::Positions::kLearned, model::Positions::kSinusoidal}) {
    torch::manual_seed(1);
    model::Gpt m(tiny(true, pos));
    m->eval();
    auto x = torch::randint(0, 64, {1, 8}, torch::kInt64);
    for (int64_t t = 0; t < 7; ++t) {
      auto y = x.clone();
      y[0][t + 1] = (y[0][t + 1].item<int64_t>() + 1) % 64;
      auto a = m->forward(x), b = m->forward(y);
      EXPECT_TRUE(torch::equal(a.narrow(1, 0, t + 1), b.narrow(1, 0, t + 1))) << "position " << t;
      EXPECT_FALSE(torch::allclose(a.narrow(1, t + 1, 1), b.narrow(1, t + 1, 1)));
    }
  }
}

TEST(Model, TiedHeadSharesStorageAndAppearsOnce) {
  torch::manual_seed(2);
  model::Gpt m(tiny(true));
  EXPECT_EQ(m->output_weight().data_ptr(), m->tok_emb->weight.data_ptr());
  int count = 0;
  for (auto& p : m->parameters()) count += p.data_ptr() == m->tok_emb->weight.data_ptr();
  EXPECT_EQ(count, 1);
  for (auto& [name, p] : model::named_weights(*m)) EXPECT_NE(name, "head.weight");

  model::Gpt u(tiny(false));
  EXPECT_NE(u->output_weight().data_ptr(), u->tok_emb->weight.data_ptr());
  EXPECT_EQ(u->parameters().size(), m->parameters().size() + 1);
}

TEST(Model, SinusoidalValuesAtKnownPositions) {
  auto pe = model::sinusoidal_table(4, 6);
  for (int64_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(pe[0][i].item<float>(), i % 2 == 0 ? 0.0f : 1.0f);
  // pos 1, i=0: sin(1), cos(1); i=1 (dims 2,3): angle 1/10000^(2/6)
  EXPECT_NEAR(pe[1][0].item<float>(), std::sin(1.0), 1e-6);
  EXPECT_NEAR(pe[1][1].item<float>(), std::cos(1.0), 1e-6);
  const double a = 3.0 / std::pow(10000.0, 2.0 / 6.0);
  EXPECT_NEAR(pe[3][2].item<float>(), std::sin(a), 1e-6);
  EXPECT_NEAR(pe[3][3].item<float>(), std::cos(a), 1e-6);
  // offset continues the same table, beyond the buffer too
  EXPECT_TRUE(torch::allclose(model::sinusoidal_table(2, 6, 2), pe.narrow(0, 2, 2)));
  model::SinusoidalPositionsImpl s(4, 6);
  EXPECT_TRUE(torch::allclose(s.forward(3, 5), model::sinusoidal_table(3, 6, 5)));
  EXPECT_TRUE(s.parameters().empty());
}

TEST(Model, InitialLossIsNearLnV) {
  torch::manual_seed(3);
  auto c = tiny();
  model::Gpt m(c);
  auto x = torch::randint(0, 64, {16, 8}, torch::kInt64);
  auto y = torch::randint(0, 64, {16, 8}, torch::kInt64);
  torch::NoGradGuard g;
  double loss = full_logits_loss(m->forward(x), y).item<double>();
  EXPECT_NEAR(loss, std::log(64.0), 0.15);
}

TEST(Model, ChunkedLossEqualsFullLogitsLoss) {
  torch::manual_seed(7);
  model::Gpt m(tiny(false));
  auto x = torch::randint(0, 64, {5, 8}, torch::kInt64);
  auto y = torch::randint(0, 64, {5, 8}, torch::kInt64);
  auto full = full_logits_loss(m->forward(x), y);
  auto chunked = model::chunked_next_token_loss(m->forward_hidden(x), m->output_weight(), y, /*chunk_rows=*/7);
  EXPECT_NEAR(full.item<double>(), chunked.item<double>(), 1e-6);
  EXPECT_NEAR(m->forward(x, y).item<double>(), full.item<double>(), 1e-6);
  full.backward();
  auto g_full = m->tok_emb->weight.grad().clone();
  m->zero_grad();
  chunked.backward();
  EXPECT_TRUE(torch::allclose(g_full, m->tok_emb->weight.grad(), 1e-5, 1e-7));
}

TEST(Model, OneBatchOverfits) {
  torch::manual_seed(4);
  model::Gpt m(tiny());
  train::TrainConfig tc;
  tc.lr = 1e-2;
  tc.weight_decay = 0.0;
  auto groups = train::split_decay_groups(*m);
  auto opt = std::make_unique<train::RunOptimizer>(groups, tc);
  auto x = torch::randint(0, 64, {4, 8}, torch::kInt64);
  auto y = torch::randint(0, 64, {4, 8}, torch::kInt64);
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    auto loss = full_logits_loss(m->forward(x), y);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    opt->zero_grad();
    loss.backward();
    opt->step();
  }
  EXPECT_LT(last, 0.1 * first) << "first " << first << " last " << last;
}

TEST(Model, DecayGroupsFollowTheContract) {
  torch::manual_seed(5);
  model::Gpt m(tiny(false));
  auto g = train::split_decay_groups(*m);
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  EXPECT_TRUE(has(g.no_decay_names, "tok_emb.weight"));
  EXPECT_TRUE(has(g.no_decay_names, "pos_emb.weight"));
  EXPECT_TRUE(has(g.no_decay_names, "ln_f.weight"));
  EXPECT_TRUE(has(g.no_decay_names, "blocks.0.attn.qkv.bias"));
  EXPECT_TRUE(has(g.decay_names, "blocks.1.mlp.fc.weight"));
  EXPECT_TRUE(has(g.decay_names, "head.weight"));
}

TEST(Model, ResidualProjectionsUseScaledInit) {
  torch::manual_seed(6);
  auto c = tiny();
  c.d_model = 64;
  c.n_heads = 4;
  c.n_layers = 8;
  model::Gpt m(c);
  for (auto& [name, p] : model::named_weights(*m)) {
    if (name == "blocks.0.mlp.proj.weight") {
      EXPECT_NEAR(p.std().item<double>(), 0.02 / 4.0, 0.001);
    } else if (name == "blocks.0.mlp.fc.weight") {
      EXPECT_NEAR(p.std().item<double>(), 0.02, 0.001);
    } else if (name == "ln_f.weight") {
      EXPECT_TRUE(torch::equal(p, torch::ones_like(p)));
    }
  }
}

}  // namespace lm::test

namespace lm::test {

// GptConfig's fields are listed once (model/gpt_config.h visit_fields): changing any one of them changes the
// JSON written to arch.json, breaks equality, and is the one difference the resume check sees; JSON reads it
// back. A member missing from the list fails the static_assert in gpt_config.cpp.
TEST(GptConfig, EveryListedFieldReachesJsonEqualityAndTheResumeCheck) {
  const model::GptConfig base;
  size_t n = 0;
  visit_fields(base, [&](const char*, const auto&) { ++n; });
  EXPECT_EQ(n, model::field_texts(base).size());
  for (size_t i = 0; i < n; ++i) {
    model::GptConfig other = base;
    size_t at = 0;
    std::string key;
    visit_fields(other, [&](const char* k, auto& v) {
      if (at++ != i) return;
      key = k;
      using T = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<T, bool>) {
        v = !v;
      } else if constexpr (std::is_same_v<T, int64_t>) {
        v += 2;
      } else {
        v = v == T{} ? static_cast<T>(1) : T{};
      }
    });
    EXPECT_FALSE(other == base) << key;
    nlohmann::json a = base, b = other;
    EXPECT_NE(a.at(key), b.at(key)) << key;
    EXPECT_EQ(a.size(), n) << "every field in arch.json";
    EXPECT_TRUE(b.get<model::GptConfig>() == other) << key << " reads back";
    const auto was = model::field_texts(base), is = model::field_texts(other);
    size_t differing = 0;
    for (size_t f = 0; f < n; ++f) differing += was[f] != is[f] ? 1 : 0;
    EXPECT_EQ(differing, 1u) << key;
    EXPECT_NE(was[i].second, is[i].second) << key;
  }
}

// The fields added after arch.json's first form (mlp_activation and the recipe's keys) read as their
// defaults from an older file, which computed those: an older checkpoint is the GPT-2 model it was. A field
// of the first form is still required.
TEST(GptConfig, AnOlderArchJsonMeansTheLaterFieldsDefaults) {
  model::GptConfig modern;
  modern.d_model = 96;
  modern.mlp_activation = model::MlpActivation::kRelu2;
  modern.rope_base = 500.0;
  modern.qk_norm = true;
  modern.bias = false;
  modern.init_std = 0.1;
  modern.embedding_init_std = 0.2;
  modern.zero_init_proj = true;
  modern.logit_softcap = 15.0;
  nlohmann::json j = modern;
  for (const char* later : {"mlp_activation", "rope_base", "qk_norm", "bias", "init_std", "embedding_init_std",
                            "zero_init_proj", "logit_softcap"}) {
    j.erase(later);
  }
  model::GptConfig want;
  want.d_model = 96;
  EXPECT_TRUE(j.get<model::GptConfig>() == want) << model::describe(j.get<model::GptConfig>());
  j.erase("d_model");
  EXPECT_THROW(j.get<model::GptConfig>(), nlohmann::json::exception);
}

}  // namespace lm::test
