// One training file is enough: the held-out split (data/split.h) and what a run, a resume, a report and a
// fine-tune make of it when the config sets only data.train.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "data/split.h"
#include "test_util.h"
#include "util/errors.h"
#include "util/hash.h"

namespace lm::test {
namespace {

// A corpus of `n` distinct lines, so that a line's text says where it came from.
fs::path numbered_corpus(const ScratchDir& dir, int n) {
  std::ofstream out(dir / "numbered.txt");
  for (int i = 0; i < n; ++i) out << "line " << i << " of the numbered corpus\n";
  return dir / "numbered.txt";
}

TEST(Split, HoldsOutWholeLinesInBlocksDisjointFromTraining) {
  ScratchDir dir("split-unit");
  const fs::path src = numbered_corpus(dir, 2000);
  const data::CorpusSplit s = data::split_corpus({src, 0.05, 7});
  EXPECT_EQ(s.lines, 2000);
  EXPECT_EQ(s.val_lines, 100);
  EXPECT_EQ(s.held_out.size(), 4u) << "100 lines / 25 per block";
  const auto train = lines_of(s.train), val = lines_of(s.val);
  EXPECT_EQ(train.size() + val.size(), 2000u);
  const std::set<std::string> train_set(train.begin(), train.end());
  for (const auto& v : val) EXPECT_EQ(train_set.count(v), 0u) << v << " is on both sides";
  // each block is contiguous, blocks lie in file order, one in each quarter of the file
  int64_t at = 0;
  for (size_t b = 0; b < s.held_out.size(); ++b) {
    const auto& r = s.held_out[b];
    EXPECT_GE(r.begin, 500 * static_cast<int64_t>(b));
    EXPECT_LE(r.end, 500 * static_cast<int64_t>(b + 1));
    for (int64_t i = r.begin; i < r.end; ++i) EXPECT_EQ(val[at++], "line " + std::to_string(i) + " of the numbered corpus");
  }
  EXPECT_EQ(s.source_sha256, util::sha256_file(src));
  EXPECT_NE(data::describe_split(s, src).find("held out 100 of 2000 lines (5.0%) as validation, 4 blocks: lines "),
            std::string::npos)
      << data::describe_split(s, src);
}

TEST(Split, TheSeedPlacesTheBlocksAndTheSameSeedGivesTheSameSplit) {
  ScratchDir dir("split-seed");
  const fs::path src = numbered_corpus(dir, 600);
  const auto a = data::split_corpus({src, 0.1, 1}), again = data::split_corpus({src, 0.1, 1}),
             other = data::split_corpus({src, 0.1, 2});
  EXPECT_EQ(a.val, again.val);
  EXPECT_EQ(a.train, again.train);
  EXPECT_NE(a.val, other.val) << "another seed, other blocks";
  EXPECT_EQ(a.val_lines, other.val_lines);
}

TEST(Split, RefusesWhatItCannotSplit) {
  ScratchDir dir("split-bad");
  std::ofstream(dir / "one.txt") << "only one line\n";
  EXPECT_THROW(data::split_corpus({dir / "one.txt", 0.05, 1}), DataError);
  const fs::path src = numbered_corpus(dir, 10);
  EXPECT_THROW(data::split_corpus({src, 0.0, 1}), ConfigError);
  EXPECT_THROW(data::split_corpus({src, 0.6, 1}), ConfigError);
  // a final line without '\n' still counts, and comes back with one
  std::ofstream(dir / "two.txt") << "first\nsecond";
  const auto s = data::split_corpus({dir / "two.txt", 0.5, 1});
  EXPECT_EQ(s.lines, 2);
  EXPECT_EQ(s.train.size() + s.val.size(), std::string("first\nsecond\n").size());
}

// `train` with only data.train: the run cuts train.txt and val.txt, validates on lines it never trains on,
// logs what it held out, resumes against the same split, and the report names both files.
TEST(Split, OneFileTrainsValidatesResumesAndReports) {
  ScratchDir dir("split-run");
  RunSpec spec;
  spec.val_text = "";
  spec.train = "batch_size: 4, max_steps: 6, warmup_steps: 1, eval_every: 3";
  spec.extra = "checkpoint: {every: 3, keep_last: 2}\n";
  const fs::path cfg = write_run_config(dir, spec), run = dir / "run";
  auto r = run_lmtrain("train -c " + cfg.string() + " --set train.max_steps=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("held out 4 of 70 lines (5.7%) as validation, 1 block: lines "), std::string::npos) << r.output;
  const auto train = lines_of(slurp(run / "train.txt")), val = lines_of(slurp(run / "val.txt"));
  EXPECT_EQ(train.size(), 66u);
  EXPECT_EQ(val.size(), 4u);
  const std::set<std::string> train_set(train.begin(), train.end());
  for (const auto& v : val) EXPECT_EQ(train_set.count(v), 0u) << v;
  const auto first_val = util::sha256_file(run / "val.txt");

  r = run_lmtrain("train -c " + cfg.string() + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("after 6 steps"), std::string::npos) << r.output;
  EXPECT_EQ(util::sha256_file(run / "val.txt"), first_val) << "the resume cut the same lines";
  // another seed would hold out other lines: the resume refuses it, naming the split
  r = run_lmtrain("train -c " + cfg.string() + " --resume auto --set run.seed=99 --set train.max_steps=9");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("data.train (sha256 of its held-out lines)"), std::string::npos) << r.output;
  EXPECT_EQ(util::sha256_file(run / "val.txt"), first_val) << "a refused resume rewrites nothing";

  r = run_lmtrain("report " + run.string() + " --points 20 --neighbours 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string page = slurp(run / "report.html");
  const std::string open = "id=\"report-data\">";
  const auto from = page.find(open) + open.size();
  const auto data = nlohmann::json::parse(page.substr(from, page.find("</script>", from) - from))["summary"]["data"];
  EXPECT_EQ(data["val"]["path"], (run / "val.txt").string());
  EXPECT_EQ(data["train"]["path"], (run / "train.txt").string());
  EXPECT_EQ(data["held_out_of"], data_file("tiny_en.txt").string());
}

// A fine-tune with only data.train set validates on lines held out of its own file, and its forgetting report
// cuts the original run's held-out lines again.
TEST(Split, AFinetuneOfAOneFileRunNeedsNoValidationFiles) {
  ScratchDir dir("split-ft");
  RunSpec pre;
  pre.val_text = "";
  auto r = run_lmtrain("train -c " + write_run_config(dir, pre).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path cfg = dir / "ft.yaml";
  {
    std::ofstream out(cfg);
    out << "run: {dir: " << (dir / "ft").string() << ", seed: 4, threads: 1, blas_threads: 1, precision: fp32}\n"
        << "data: {train: " << data_file("tiny_en.txt").string() << ", val_fraction: 0.2}\n"
        << "train: {batch_size: 4, max_steps: 3, warmup_steps: 1, eval_every: 0}\n";
  }
  r = run_lmtrain("finetune --from " + (dir / "run").string() + " -c " + cfg.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("held out 14 of 70 lines (20.0%)"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir / "ft" / "original_val.txt"), slurp(dir / "run" / "val.txt")) << "the original run's held-out lines";
  const auto forgetting = nlohmann::json::parse(slurp(dir / "ft" / "forgetting.json"));
  EXPECT_EQ(forgetting["new"]["val"], (dir / "ft" / "val.txt").string());
  EXPECT_EQ(forgetting["original"]["val"], (dir / "ft" / "original_val.txt").string());
}

}  // namespace
}  // namespace lm::test
