// Embedding drift: zero for identical tables, exact for a hand-perturbed row, unseen rows counted.
#include <gtest/gtest.h>

#include <cmath>

#include "inspect/drift.h"
#include "test_util.h"

namespace lm::test {

TEST(Drift, IdenticalTablesReportZeroDrift) {
  tokenizer::Tokenizer tok(english_tokenizer_path());
  torch::manual_seed(30);
  auto w = torch::randn({128, 16});
  auto r = inspect::drift_report("tok_emb.weight", w, w.clone(), {}, tok, 5);
  EXPECT_EQ(r.rows, 128);
  EXPECT_EQ(r.l2.max, 0.0);
  EXPECT_NEAR(r.cos_drift.max, 0.0, 1e-12);
  EXPECT_EQ(r.unseen_rows, 0);
  EXPECT_TRUE(r.top.empty()) << "a row that did not move is not among the most moved";
  EXPECT_NE(inspect::format_drift(r).find("most moved: none moved"), std::string::npos) << inspect::format_drift(r);
}

TEST(Drift, AHandPerturbedRowIsReportedExactly) {
  tokenizer::Tokenizer tok(english_tokenizer_path());
  torch::manual_seed(31);
  auto before = torch::randn({128, 16}, torch::kFloat64).to(torch::kFloat32);
  auto after = before.clone();
  auto delta = torch::zeros({16});
  delta[0] = 3.0f;
  delta[1] = 4.0f;  // |delta| = 5
  after[42] += delta;
  std::vector<int64_t> counts(128, 1);
  counts[42] = 7;
  counts[100] = 0;
  counts[101] = 0;
  auto r = inspect::drift_report("tok_emb.weight", before, after, counts, tok, 3);
  ASSERT_FALSE(r.top.empty());
  EXPECT_EQ(r.top[0].id, 42);
  EXPECT_NEAR(r.top[0].l2, 5.0, 1e-6);
  EXPECT_EQ(r.top[0].count, 7);
  EXPECT_EQ(r.top[0].piece, tok.piece(42));
  const double expect_cos = 1.0 - torch::cosine_similarity(before[42].to(torch::kFloat64).unsqueeze(0),
                                                           after[42].to(torch::kFloat64).unsqueeze(0), 1, 1e-12).item<double>();
  EXPECT_NEAR(r.top[0].cos_drift, expect_cos, 1e-12);
  EXPECT_NEAR(r.l2.max, 5.0, 1e-6);
  EXPECT_NEAR(r.l2.mean, 5.0 / 128.0, 1e-6);
  EXPECT_EQ(r.l2.p50, 0.0);
  EXPECT_EQ(r.top.size(), 1u) << "only rows that moved are listed";
  EXPECT_EQ(r.unseen_rows, 2);
  EXPECT_EQ(r.unseen_l2.max, 0.0);
  EXPECT_NE(inspect::format_drift(r).find("most moved"), std::string::npos);
}

}  // namespace lm::test
