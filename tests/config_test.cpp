// Config: precedence, unknown keys with suggestions, type and range errors reported together, dump.
#include <gtest/gtest.h>

#include "config/config.h"
#include "util/errors.h"

namespace lm::test {

namespace {
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    config::parse_config(yaml, "test.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
const std::string kData = "data: {train: a.txt, val: b.txt}\n";
}  // namespace

TEST(Config, PrecedenceDefaultsThenYamlThenSet) {
  auto cfg = config::parse_config(kData + "train:\n  lr: 0.01\n  max_steps: 50\n  warmup_steps: 5\n", "t", {"train.lr=0.02"});
  EXPECT_DOUBLE_EQ(cfg.train.lr, 0.02);
  EXPECT_EQ(cfg.train.max_steps, 50);
  EXPECT_EQ(cfg.train.batch_size, train::TrainConfig{}.batch_size);
}

TEST(Config, UnknownKeyNamesItAndSuggestsTheClosest) {
  std::string e = error_of(kData + "train:\n  learning_rat: 0.1\n");
  EXPECT_NE(e.find("unknown key 'train.learning_rat'"), std::string::npos) << e;
  e = error_of(kData + "model:\n  d_modle: 64\n");
  EXPECT_NE(e.find("'model.d_modle'"), std::string::npos) << e;
  EXPECT_NE(e.find("Did you mean 'model.d_model'?"), std::string::npos) << e;
  EXPECT_NE(e.find("test.yaml:3:"), std::string::npos) << "location missing: " << e;
  e = error_of(kData + "trian:\n  lr: 0.1\n");
  EXPECT_NE(e.find("unknown section 'trian'"), std::string::npos) << e;
  EXPECT_NE(e.find("Did you mean 'train'?"), std::string::npos) << e;
  e = error_of(kData, {"train.max_step=3"});
  EXPECT_NE(e.find("Did you mean 'train.max_steps'?"), std::string::npos) << e;
}

TEST(Config, WrongTypesAndRangesAreAllReportedWithTheirKeys) {
  std::string e = error_of(kData + "train:\n  lr: fast\n  batch_size: -3\nmodel:\n  positions: rotary\n  tie_embeddings: maybe\n");
  EXPECT_NE(e.find("4 problems"), std::string::npos) << e;
  EXPECT_NE(e.find("train.lr"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a number, got 'fast'"), std::string::npos) << e;
  EXPECT_NE(e.find("train.batch_size"), std::string::npos) << e;
  EXPECT_NE(e.find("model.positions"), std::string::npos) << e;
  EXPECT_NE(e.find("model.tie_embeddings"), std::string::npos) << e;
}

TEST(Config, NonFiniteAndFractionalNumbersAreRejected) {
  EXPECT_NE(error_of(kData, {"train.lr=nan"}).find("train.lr"), std::string::npos);
  EXPECT_NE(error_of(kData, {"train.max_steps=2.5"}).find("train.max_steps"), std::string::npos);
  EXPECT_NE(error_of(kData, {"run.seed=-1"}).find("run.seed"), std::string::npos);
  EXPECT_EQ(config::parse_config(kData, "t", {"run.seed=18446744073709551615"}).run.seed, 18446744073709551615ull);
}

TEST(Config, CrossFieldRulesAndMissingData) {
  EXPECT_NE(error_of(kData + "model: {d_model: 30, n_heads: 4}\n").find("model.n_heads"), std::string::npos);
  EXPECT_NE(error_of("train: {lr: 1}\n").find("data.train"), std::string::npos);
  EXPECT_NE(error_of(kData + "train: {max_steps: 5, warmup_steps: 10}\n").find("train.warmup_steps"), std::string::npos);
  EXPECT_NE(error_of(kData + "train: {lr: 0.001, min_lr: 0.01}\n").find("train.min_lr"), std::string::npos);
}

TEST(Config, DumpRoundTrips) {
  auto cfg = config::parse_config(kData + "model: {positions: sinusoidal, d_model: 48, n_heads: 6}\nrun: {seed: 7}\n", "t", {});
  auto again = config::parse_config(config::dump_config(cfg), "dump", {});
  EXPECT_EQ(config::dump_config(again), config::dump_config(cfg));
  EXPECT_EQ(again.model.positions, model::Positions::kSinusoidal);
  EXPECT_EQ(again.model.d_model, 48);
  EXPECT_EQ(again.run.seed, 7u);
  EXPECT_EQ(again.data.train, "a.txt");
}

TEST(Config, EditDistance) {
  EXPECT_EQ(config::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(config::edit_distance("", "abc"), 3u);
}

}  // namespace lm::test
