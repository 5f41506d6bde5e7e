// What a new user tripped over (issue 16): tables that line up with Hangul and word marks, hints that name
// the flag the user typed, encode/decode that keep lines, shortest floats in --dump-config, defaults in
// --list-keys. Each is checked through the code a user reaches (the binary where it is a command).
#include <gtest/gtest.h>

#include <fstream>

#include "inspect/drift.h"
#include "inspect/geometry.h"
#include "inspect/plot.h"
#include "test_util.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::test {

namespace {

// Display columns of each line of `table` up to the first occurrence of `needle` in it.
std::vector<size_t> columns_of(const std::string& table, const std::string& needle) {
  std::vector<size_t> out;
  for (const auto& line : util::split(table, '\n')) {
    const auto at = line.find(needle);
    if (at != std::string::npos) out.push_back(util::display_width(line.substr(0, at)));
  }
  return out;
}

}  // namespace

TEST(Usability, DisplayWidthCountsTerminalColumns) {
  EXPECT_EQ(util::display_width("abc"), 3u);
  EXPECT_EQ(util::display_width("\xE2\x96\x81the"), 4u) << "the word mark is one column";
  EXPECT_EQ(util::display_width("먹었다"), 6u) << "Hangul syllables are wide";
  EXPECT_EQ(util::display_width("\xE2\x96\x81밥을"), 5u);
  EXPECT_EQ(util::display_width("e\xCC\x81"), 1u) << "a combining accent takes no column";
  EXPECT_EQ(util::display_width("\xFF" "a"), 2u) << "a stray byte counts one";
  EXPECT_EQ(util::pad("밥", 4), "밥  ");
  EXPECT_EQ(util::pad("\xE2\x96\x81the", 6), "\xE2\x96\x81the  ");
  EXPECT_EQ(util::pad("toolongpiece", 4), "toolongpiece") << "never cut";
}

TEST(Usability, NeighbourAndDriftTablesLineUpWithHangul) {
  const std::vector<inspect::Neighbour> list = {{7, "\xE2\x96\x81밥을", 0.5}, {8, "\xE2\x96\x81the", 0.4}, {9, "먹었다", 0.3}};
  const auto cols = columns_of(inspect::format_neighbours("t", list), "cos ");
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[0], cols[1]);
  EXPECT_EQ(cols[1], cols[2]);

  tokenizer::Tokenizer tok(english_tokenizer_path());
  torch::manual_seed(2);
  auto before = torch::randn({128, 8});
  auto after = before.clone();
  after[5] += 1.0;   // "▁" pieces and plain ones among the moved rows
  after[100] += 2.0;
  after[40] += 1.5;
  const std::string table = inspect::format_drift(inspect::drift_report("tok_emb.weight", before, after, {}, tok, 3));
  std::vector<size_t> id_cols;
  for (const auto& line : util::split(table, '\n')) {
    for (int id : {5, 40, 100}) {
      const auto at = line.find(" " + std::to_string(id) + " ");
      if (line.rfind("      ", 0) == 0 && at != std::string::npos && at > 8) id_cols.push_back(util::display_width(line.substr(0, at + 1 + std::to_string(id).size())));
    }
  }
  ASSERT_EQ(id_cols.size(), 3u) << table;
  EXPECT_EQ(id_cols[0], id_cols[1]) << table;
  EXPECT_EQ(id_cols[1], id_cols[2]) << table;
}

TEST(Usability, TokenizerTrainHintNamesTheFlag) {
  ScratchDir dir("hint");
  auto r = run_lmtrain("tokenizer train --input " + data_file("tiny_en.txt").string() + " --model " +
                       (dir / "t.model").string() + " --vocab-size 50000");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("set --vocab-size to at most "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("tokenizer.vocab_size"), std::string::npos) << "the user typed a flag, not a key: " << r.output;
  EXPECT_FALSE(fs::exists(dir / "t.model"));
}

TEST(Usability, EncodeKeepsLinesAndDecodeShowsLineEnds) {
  ScratchDir dir("codec");
  const std::string model = english_tokenizer_path().string();
  std::ofstream(dir / "in.txt") << "The river flows.\n\nBread rises.\n";
  auto r = run_lmtrain("tokenizer encode --model " + model + " --file " + (dir / "in.txt").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = util::split(r.output, '\n');
  ASSERT_EQ(lines.size(), 3u) << "one line of ids per input line: " << r.output;
  EXPECT_TRUE(lines[1].empty());
  std::ofstream(dir / "ids.txt") << r.output;
  r = run_command(std::string(LMTRAIN_BINARY) + " tokenizer decode --model " + model + " < " + (dir / "ids.txt").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "The river flows.\n\nBread rises.\n");
  // </s> inside a line of ids is a line end, as `sample` shows it
  tokenizer::Tokenizer tok(model);
  r = run_lmtrain("tokenizer decode --model " + model + " --ids '" + lines[0] + " " + std::to_string(tok.eos_id()) + " " +
                  lines[2] + "'");
  EXPECT_EQ(r.output, "The river flows.\nBread rises.\n");
  r = run_lmtrain("tokenizer decode --model " + model + " --ids '5,6,7'");
  EXPECT_EQ(r.exit_code, 2) << "ids separated by commas are a usage error: " << r.output;
  EXPECT_NE(r.output.find("separated by spaces, got '5,6,7'"), std::string::npos) << r.output;
}

TEST(Usability, DumpConfigPrintsShortestFloatsAndListKeysTheDefaults) {
  auto r = run_lmtrain("train -c " + std::string(LMTRAIN_SOURCE_DIR) +
                       "/configs/kjv-small.yaml --dump-config --set train.lr=0.003 --set train.min_lr=0.0003");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("lr: 0.003 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("min_lr: 0.0003 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("0000000"), std::string::npos) << "no float noise: " << r.output;
  r = run_lmtrain("train --list-keys");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("run.seed\t1337\t"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train.optimizer\tadamw\t"), std::string::npos) << r.output;
}

TEST(Usability, PlotTitlesAsTypedOneXRangeAndOnlyTheSeriesThatExist) {
  const std::string gp = inspect::plot_script("d", "o.png", "my_run", false, true, 12);
  EXPECT_NE(gp.find("pngcairo noenhanced"), std::string::npos) << "an underscore is not a subscript: " << gp;
  EXPECT_NE(gp.find("'my_run'"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("eval_batches"), std::string::npos) << "no periodic validation, no legend entry: " << gp;
  EXPECT_NE(gp.find("whole val file"), std::string::npos) << gp;
  const auto range = gp.find("set xrange [0:12]");
  ASSERT_NE(range, std::string::npos) << gp;
  EXPECT_LT(range, gp.find("\nplot ")) << "set before the first panel, so both share it";
  EXPECT_EQ(gp.find("xrange", range + 10), std::string::npos) << "and nothing changes it for the second";
  EXPECT_NE(inspect::plot_script("d", "o.png", "r", true, false, 5).find("eval_batches"), std::string::npos);
  EXPECT_NE(gp.find("set ylabel 'loss (nats/token)'"), std::string::npos) << gp;
  const std::string encoder = inspect::plot_script("d", "o.png", "r", true, true, 5, "InfoNCE");
  EXPECT_NE(encoder.find("set ylabel 'loss (InfoNCE)'"), std::string::npos) << "a contrastive run's unit: " << encoder;
}

TEST(Usability, AStaleLatestIsNamedAndTheNewestCheckpointRead) {
  ScratchDir dir("stale");
  RunSpec spec;
  spec.extra = "checkpoint: {every: 2}\n";
  ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, spec).string()).exit_code, 0);
  fs::remove(dir / "run" / "step_00000004" / "manifest.json");  // an unfinished or damaged checkpoint
  for (const std::string cmd : {"ckpt info ", "ckpt verify ", "sample --prompt the --checkpoint ", "report "}) {
    auto r = run_lmtrain(cmd + (dir / "run").string());
    EXPECT_EQ(r.exit_code, 0) << cmd << r.output;
    EXPECT_NE(r.output.find("latest names 'step_00000004', which has no manifest.json: using "), std::string::npos) << cmd << r.output;
    EXPECT_NE(r.output.find("step_00000002"), std::string::npos) << cmd << r.output;
  }
}

TEST(Usability, AMissingCorpusIsNamedWithItsResolvedPathAndNothingIsCreated) {
  ScratchDir dir("paths");
  // relative data paths, run from another working directory than the one they were written for
  std::ofstream(dir / "c.yaml") << "run: {dir: runs/x, threads: 1, blas_threads: 1}\n"
                                << "data: {train: data/missing.txt, val: data/missing_val.txt}\n"
                                << "tokenizer: {vocab_size: 96}\n"
                                << "model: {d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 16}\n"
                                << "train: {batch_size: 4, max_steps: 2, warmup_steps: 1}\n";
  for (const std::string extra : {"", " --dry-run"}) {
    auto r = run_command("cd " + dir.path().string() + " && " + LMTRAIN_BINARY + " train -c c.yaml" + extra);
    EXPECT_EQ(r.exit_code, 3) << extra << r.output;
    EXPECT_NE(r.output.find("training corpus 'data/missing.txt' (resolved against the working directory: " +
                            (dir / "data" / "missing.txt").string() + ") is missing"),
              std::string::npos)
        << extra << r.output;
    EXPECT_FALSE(fs::exists(dir / "runs")) << "a failed start creates no run directory" << extra;
  }
}

TEST(Usability, ResumingAFinishedRunSaysNothingToDoAndWritesNothing) {
  ScratchDir dir("finished");
  RunSpec spec;
  spec.train = "batch_size: 4, max_steps: 4, warmup_steps: 1, eval_every: 2, eval_batches: 1";
  spec.extra = "checkpoint: {every: 2}\n";
  const fs::path cfg = write_run_config(dir, spec);
  ASSERT_EQ(run_lmtrain("train -c " + cfg.string()).exit_code, 0);
  auto listing = [&] {
    std::string out;
    for (auto& e : fs::recursive_directory_iterator(dir / "run")) {
      // .lock holds the pid of the last process that took the run's lock: any command that locks writes it
      if (e.is_regular_file() && e.path().filename() != ".lock") out += e.path().string() + " " + util::sha256_file(e.path()) + "\n";
    }
    return out;
  };
  const std::string before = listing(), metrics = slurp(dir / "run" / "metrics.jsonl");
  for (const std::string more : {"", " --set train.max_steps=3"}) {
    auto r = run_lmtrain("train -c " + cfg.string() + " --resume auto" + more);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("nothing to do: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("is at step 4"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("final validation loss"), std::string::npos) << "no second final validation: " << r.output;
    EXPECT_EQ(slurp(dir / "run" / "metrics.jsonl"), metrics);
    EXPECT_EQ(listing(), before) << "no file added, removed or rewritten";
  }
}

}  // namespace lm::test
