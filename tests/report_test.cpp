// `lmtrain report`: the maths it adds to inspect/ (batched neighbours, PCA, per-row drift), the curves it
// reads from metrics.jsonl, and the command through the binary: one self-contained page whose data is
// what the run holds, a page that cannot be broken by a piece or prompt, and refusals that lose nothing.
// The page in a real browser is tests/report_browser_test.py (CTest report.browser).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "inspect/drift.h"
#include "inspect/geometry.h"
#include "report/sections.h"
#include "test_util.h"
#include "util/errors.h"

namespace lm::test {

namespace {

// The JSON the page carries (between its report-data script tags).
nlohmann::json page_data(const std::string& page) {
  const std::string open = "id=\"report-data\">";
  const auto from = page.find(open) + open.size();
  return nlohmann::json::parse(page.substr(from, page.find("</script>", from) - from));
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(Report, NearestEachIsNearestOneByOne) {
  torch::manual_seed(11);
  model::Gpt m(tiny_config(128));
  tokenizer::Tokenizer tok(english_tokenizer_path());
  std::vector<int32_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37) % 128);  // more than one chunk of 256
  const auto& table = m->tok_emb->weight;
  const auto lists = inspect::nearest_each(table, ids, 6, tok);
  ASSERT_EQ(lists.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto one = inspect::nearest(table, table[ids[i]], 6, {ids[i]}, tok);
    ASSERT_EQ(lists[i].size(), one.size());
    for (size_t k = 0; k < one.size(); ++k) {
      EXPECT_EQ(lists[i][k].id, one[k].id) << "id " << ids[i] << " rank " << k;
      EXPECT_NEAR(lists[i][k].cosine, one[k].cosine, 1e-12);
      EXPECT_NE(lists[i][k].id, ids[i]) << "a piece is not its own neighbour in the report";
    }
  }
  EXPECT_THROW(inspect::nearest_each(table, ids, 128, tok), ConfigError) << "k must leave room for the piece itself";
}

TEST(Report, PcaFindsTheMainAxesWithFixedSigns) {
  torch::manual_seed(5);
  const int64_t N = 400, C = 12;
  auto axes = std::get<0>(at::linalg_qr(torch::randn({C, C}, torch::kFloat64)));  // orthonormal columns
  auto a = torch::randn({N}, torch::kFloat64) * 5.0, b = torch::randn({N}, torch::kFloat64) * 2.0;
  auto x = torch::outer(a, axes.select(1, 0)) + torch::outer(b, axes.select(1, 1)) +
           0.05 * torch::randn({N, C}, torch::kFloat64) + 3.0;  // an offset PCA must remove
  const auto p = inspect::pca(x.to(torch::kFloat32), 2);
  ASSERT_EQ(p.coords.sizes(), (std::vector<int64_t>{N, 2}));
  EXPECT_LT(p.coords.mean(0).abs().max().item<double>(), 1e-4) << "centred";
  // the two axes are a and b (up to sign), in that order, and explain the variance they carry
  auto corr = [](const torch::Tensor& u, const torch::Tensor& v) {
    auto uc = u - u.mean(), vc = v - v.mean();
    return ((uc * vc).sum() / (uc.norm() * vc.norm())).item<double>();
  };
  EXPECT_GT(std::abs(corr(p.coords.select(1, 0), a)), 0.99);
  EXPECT_GT(std::abs(corr(p.coords.select(1, 1), b)), 0.99);
  // exactly the eigenvectors of the covariance with the two largest eigenvalues (up to sign)
  const auto centred = x - x.mean(0, true);
  const auto eig = torch::linalg::eigh(centred.t().matmul(centred), "L");  // ascending
  const auto values = std::get<0>(eig), vectors = std::get<1>(eig);
  for (int64_t d = 0; d < 2; ++d) {
    const auto reference = centred.matmul(vectors.select(1, C - 1 - d));
    EXPECT_NEAR(std::abs(corr(p.coords.select(1, d), reference)), 1.0, 1e-6) << "axis " << d;
    EXPECT_NEAR(p.explained[d], (values[C - 1 - d] / values.sum()).item<double>(), 1e-4);
  }
  // the sign rule fixes each axis by the covariance alone, so negated data gives the negated picture
  const auto q = inspect::pca(-x.to(torch::kFloat32), 2);
  EXPECT_TRUE(torch::allclose(q.coords, -p.coords, 1e-5, 1e-5));
  EXPECT_TRUE(torch::equal(inspect::pca(x.to(torch::kFloat32), 2).coords, p.coords)) << "deterministic";
  EXPECT_THROW(inspect::pca(x, 13), ConfigError);
}

TEST(Report, RowDriftIsWhatTheDriftReportSummarises) {
  torch::manual_seed(8);
  tokenizer::Tokenizer tok(english_tokenizer_path());
  auto before = torch::randn({128, 16});
  auto after = before.clone();
  after[3] += 0.5;
  after[70] *= -1.0;
  const auto rows = inspect::row_drift("t", before, after);
  const auto report = inspect::drift_report("t", before, after, {}, tok, 2);
  EXPECT_DOUBLE_EQ(rows.l2.max().item<double>(), report.l2.max);
  EXPECT_EQ(report.top[0].id, 70);
  EXPECT_NEAR(rows.cos_drift[70].item<double>(), 2.0, 1e-12) << "a flipped row: 1 - cos = 2";
  EXPECT_EQ(rows.l2[5].item<double>(), 0.0);
  EXPECT_THROW(inspect::row_drift("t", before, after.slice(0, 0, 10)), CheckpointError);
}

TEST(Report, CurvesMarkResumesAndAddUpWallTime) {
  ScratchDir dir("report-curves");
  std::ofstream(dir / "metrics.jsonl")
      << R"({"kind":"start","step":0,"time":100})" "\n"
      << R"({"kind":"train","step":2,"loss":4.5,"lr":0.001,"tokens_per_s":900,"time":110})" "\n"
      << R"({"kind":"val","step":2,"loss":4.6,"bpb":3.1,"full":false,"time":130})" "\n"
      << R"({"kind":"resume","step":2,"time":200})" "\n"
      << R"({"kind":"train","step":4,"loss":null,"lr":0.001,"tokens_per_s":950,"time":230})" "\n"
      << R"({"kind":"val","step":4,"loss":4.4,"bpb":3.0,"full":true,"time":260})" "\n"
      << R"({"kind":5,"step":"x"})" "\n"
      << R"({"kind":"train","step":6,"lo)";  // torn
  const auto c = report::curves_section(dir.path());
  EXPECT_EQ(c["train"]["step"], nlohmann::json({2, 4}));
  EXPECT_TRUE(c["train"]["loss"][1].is_null()) << "a non-finite loss is a gap, not a crash";
  EXPECT_EQ(c["val"]["step"], nlohmann::json({2}));
  EXPECT_EQ(c["full"]["step"], nlohmann::json({4}));
  EXPECT_EQ(c["segments"].size(), 2u);
  EXPECT_EQ(c["segments"][1]["kind"], "resume");
  EXPECT_DOUBLE_EQ(c["wall_s"].get<double>(), 30.0 + 60.0) << "each process from its start to its last record";
  const auto none = report::curves_section(dir / "nowhere");
  EXPECT_FALSE(none["found"].get<bool>());
  EXPECT_TRUE(none["wall_s"].is_null());
}

TEST(Report, OnePageFromARealRunThatNothingCanBreakOrClobber) {
  ScratchDir dir("report-cli");
  RunSpec spec;
  spec.train = "batch_size: 4, max_steps: 4, warmup_steps: 1, eval_every: 2, eval_batches: 1, log_every: 1";
  spec.extra = "checkpoint: {every: 2}\n";
  const fs::path cfg = write_run_config(dir, spec);
  ASSERT_EQ(run_lmtrain("train -c " + cfg.string()).exit_code, 0);
  auto r = run_lmtrain("train -c " + cfg.string() + " --resume auto --set train.max_steps=6");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // a prompt that would end the data element if it were not escaped
  r = run_lmtrain("report " + (dir / "run").string() + " --points 50 --neighbours 3 --prompt 'The river </script><b>x'" +
                  " --context-text 'the river runs to the sea' --context-text 'the sea is wide' --context-piece the");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("file://"), std::string::npos) << r.output;
  const std::string page = slurp(dir / "run" / "report.html");
  EXPECT_EQ(occurrences(page, "</script>"), 2u) << "the data and the code, nothing more";
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos) << "the page may load nothing";
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);
  const auto data = page_data(page);
  EXPECT_EQ(data["probs"]["prompt"], "The river </script><b>x");
  EXPECT_EQ(data["map"]["ids"].size(), 50u);
  EXPECT_EQ(data["map"]["neighbours"]["ids"][0].size(), 3u);
  EXPECT_EQ(data["pieces"].size(), 128u);
  EXPECT_EQ(data["summary"]["step"], 6);
  EXPECT_EQ(data["curves"]["segments"].size(), 2u) << "a start and a resume";
  EXPECT_GT(data["curves"]["wall_s"].get<double>(), 0.0);
  EXPECT_EQ(data["positions"]["cos"].size(), 16u) << "T = 16 positions";
  EXPECT_TRUE(data["drift"].is_null()) << "not a fine-tune, no --compare";
  EXPECT_EQ(data["context"]["piece"], "\xE2\x96\x81the");
  ASSERT_GE(data["context"]["pairs"].size(), 1u);
  EXPECT_EQ(data["context"]["pairs"][0]["cosine"][0].get<double>(), 1.0) << "the same row";
  EXPECT_EQ(data["context"]["depths"].size(), 5u) << "input row, input, 2 blocks, final";
  EXPECT_EQ(data["context"]["occurrences"][0]["lens"].size(), 5u);

  // a checkpoint named with a trailing slash (tab completion) is still read as part of its run
  fs::remove(dir / "run" / "report.html");
  r = run_lmtrain("report " + (dir / "run" / "step_00000006").string() + "/ --points 20 --neighbours 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "report.html")) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run" / "step_00000006" / ".report.html")) << "never inside the checkpoint";
  EXPECT_TRUE(page_data(slurp(dir / "run" / "report.html"))["curves"]["found"].get<bool>()) << "the run's metrics";

  // refusals: exit code, one clear line, nothing written or lost
  const fs::path keep = dir / "keep.txt";
  std::ofstream(keep) << "a good file";
  r = run_lmtrain("report " + (dir / "run").string() + " -o " + keep.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not an lmtrain report"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(keep), "a good file");
  r = run_lmtrain("report " + (dir / "run").string() + " -o " + (dir / "no" / "such" / "r.html").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_lmtrain("report " + (dir / "nowhere").string());
  EXPECT_EQ(r.exit_code, 4) << r.output;
  r = run_lmtrain("report " + (dir / "run").string() + " --points 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_lmtrain("report " + (dir / "run").string() + " --context-text 'the river'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--context-text: expected two or more"), std::string::npos) << r.output;

  // --compare: another checkpoint of the same run works, another tokenizer is refused
  r = run_lmtrain("report " + (dir / "run").string() + " --compare " + (dir / "run" / "step_00000002").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(page_data(slurp(dir / "run" / "report.html"))["drift"]["base_step"], 2) << "the earlier report was replaced";
  RunSpec other = spec;
  other.run = "other";
  other.tokenizer = "vocab_size: 96";
  ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, other).string()).exit_code, 0);
  r = run_lmtrain("report " + (dir / "run").string() + " --compare " + (dir / "other").string() + " -o " +
                  (dir / "x.html").string());
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("same tokenizer"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "x.html"));
}

}  // namespace lm::test
