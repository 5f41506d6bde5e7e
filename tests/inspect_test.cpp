// Reading a checkpoint: teacher-forced probabilities are distributions, a piece is its own nearest
// neighbour, parameter arithmetic matches hand counts, and every inspect command runs on a real
// checkpoint through the binary (plus train --dry-run and tokenizer stats).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "inspect/geometry.h"
#include "inspect/params.h"
#include "inspect/probs.h"
#include "test_util.h"
#include "util/errors.h"

namespace lm::test {

namespace {

int64_t numel(const model::GptConfig& cfg) {
  torch::manual_seed(0);
  model::Gpt m(cfg);
  int64_t n = 0;
  for (auto& [name, p] : model::named_weights(*m)) n += p.numel();
  return n;
}

// A 4-step run on tiny_en.txt; returns its config path (the run is in dir/run).
fs::path trained(const ScratchDir& dir) {
  RunSpec spec;
  spec.seed = 2;
  const fs::path cfg = write_run_config(dir, spec);
  auto r = run_lmtrain("train -c " + cfg.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return cfg;
}

}  // namespace

TEST(Inspect, ParamsArithmeticMatchesHandCounts) {
  // quickstart size: V=8192 C=128 L=4 T=128, learned positions, tied
  model::GptConfig a;
  a.vocab_size = 8192;
  // tok 8192*128 + pos 128*128 + 4 blocks * (2*256 LN + (4*128^2 + 4*128) attn + (2*128*512 + 512 + 128) mlp) + ln_f 256
  const int64_t hand_a = 1048576 + 16384 + 4 * (512 + 66048 + 131712) + 256;
  EXPECT_EQ(hand_a, 1858304);
  auto pa = inspect::count_params(a);
  EXPECT_EQ(pa.total, hand_a);
  EXPECT_EQ(pa.embedding, 1048576);
  EXPECT_EQ(pa.tying_saving, 1048576);
  EXPECT_EQ(pa.total, numel(a));
  // V=1000 C=64 L=2 T=32, sinusoidal (no table), untied head
  model::GptConfig b;
  b.vocab_size = 1000;
  b.d_model = 64;
  b.n_layers = 2;
  b.n_heads = 2;
  b.max_seq_len = 32;
  b.positions = model::Positions::kSinusoidal;
  b.tie_embeddings = false;
  const int64_t hand_b = 64000 + 2 * (256 + (4 * 4096 + 256) + (2 * 64 * 256 + 256 + 64)) + 128 + 64000;
  EXPECT_EQ(hand_b, 228096);
  auto pb = inspect::count_params(b);
  EXPECT_EQ(pb.total, hand_b);
  EXPECT_EQ(pb.untied_head, 64000);
  EXPECT_EQ(pb.positions, 0);
  EXPECT_EQ(pb.total, numel(b));
  // the example, and memory in MiB
  const std::string t = inspect::format_table_arithmetic(50000, 4096);
  EXPECT_NE(t.find("50,000 x 4,096 = 204,800,000 parameters"), std::string::npos) << t;
  EXPECT_NE(t.find("fp16: 409,600,000 bytes = 390.6 MiB"), std::string::npos) << t;
  const std::string report = inspect::format_params(a, pa);
  EXPECT_NE(report.find("7.1 MiB"), std::string::npos) << report;   // 1,858,304 x 4 bytes
  EXPECT_NE(report.find("28.4 MiB"), std::string::npos) << report;  // + grads + two AdamW moments
}

TEST(Inspect, TeacherForcedProbabilitiesAreDistributions) {
  torch::manual_seed(3);
  model::Gpt m(tiny_config(128));
  tokenizer::Tokenizer tok(english_tokenizer_path());
  const std::vector<int32_t> ids = {tok.eos_id(), 7, 9, 11, 3, 5};
  auto rows = inspect::teacher_forced(*m, tok, ids, 4);
  ASSERT_EQ(rows.size(), 5u);
  auto p = torch::softmax(m->forward(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end() - 1)).unsqueeze(0))[0].to(torch::kFloat64), -1);
  for (size_t t = 0; t < rows.size(); ++t) {
    EXPECT_NEAR(rows[t].prob_sum, 1.0, 1e-9);
    EXPECT_EQ(rows[t].next_id, ids[t + 1]);
    EXPECT_NEAR(rows[t].prob, p[static_cast<int64_t>(t)][ids[t + 1]].item<double>(), 1e-6);
    EXPECT_NEAR(rows[t].surprisal_bits, -std::log2(rows[t].prob), 1e-9);
    const auto row = p[static_cast<int64_t>(t)];
    EXPECT_EQ(rows[t].rank, 1 + (row > row[ids[t + 1]]).sum().item<int64_t>());
    ASSERT_EQ(rows[t].top.size(), 4u);
    EXPECT_GE(rows[t].top[0].prob, rows[t].top[3].prob);
    EXPECT_GT(rows[t].entropy_bits, 0.0);
    EXPECT_LE(rows[t].entropy_bits, std::log2(128.0) + 1e-9);
  }
  EXPECT_THROW(inspect::teacher_forced(*m, tok, std::vector<int32_t>(10, 3), 4), ConfigError);  // T=8: 9 ids at most
}

TEST(Inspect, APieceIsItsOwnNearestNeighbourUnlessExcluded) {
  torch::manual_seed(4);
  model::Gpt m(tiny_config(128));
  tokenizer::Tokenizer tok(english_tokenizer_path());
  const int32_t id = 17;
  auto list = inspect::nearest(m->tok_emb->weight, m->tok_emb->weight[id], 5, {}, tok);
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(list[0].id, id);
  EXPECT_NEAR(list[0].cosine, 1.0, 1e-12);
  for (size_t i = 1; i < list.size(); ++i) EXPECT_LE(list[i].cosine, list[i - 1].cosine);
  auto without = inspect::nearest(m->tok_emb->weight, m->tok_emb->weight[id], 5, {id}, tok);
  EXPECT_EQ(without[0].id, list[1].id);
  for (auto& n : without) EXPECT_NE(n.id, id);
  // a word finds its word-start piece; nonsense is a clear error
  EXPECT_EQ(tok.piece(inspect::find_piece(tok, "the")), "\xE2\x96\x81the");
  EXPECT_THROW(inspect::find_piece(tok, "zzqxzzqx"), ConfigError);
}

TEST(Inspect, EveryCommandRunsOnARealCheckpoint) {
  ScratchDir dir("inspect");
  const fs::path cfg = trained(dir);
  const std::string ck = " --checkpoint " + (dir / "run").string();
  auto r = run_lmtrain("inspect probs" + ck + " --text 'The river runs' -k 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rows = nlohmann::json::parse(r.output);
  ASSERT_GE(rows.size(), 2u);
  for (auto& row : rows) EXPECT_NEAR(row["prob_sum"].get<double>(), 1.0, 1e-9);
  r = run_lmtrain("inspect probs" + ck + " --text 'The river runs'");
  EXPECT_NE(r.output.find("mean surprisal"), std::string::npos) << r.output;

  r = run_lmtrain("inspect neighbours" + ck + " --piece the -k 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cos 1.0000"), std::string::npos) << r.output;
  r = run_lmtrain("inspect neighbours" + ck + " --piece the -k 3 --compare " + (dir / "run").string());
  EXPECT_NE(r.output.find("overlap: 3 of 3"), std::string::npos) << r.output;

  r = run_lmtrain("inspect positions" + ck + " --positions 0,1,15 --dims 0-3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("closeness to sinusoidal"), std::string::npos) << r.output;

  // bad input: one error line, exit 2, and (sampling) nothing printed before it
  for (const std::string& bad : {"inspect neighbours" + ck + " --piece zzqxzzqx", "inspect positions" + ck + " --positions 16",
                                "inspect positions" + ck + " --positions 0-3x", "sample" + ck + " --prompt the --generate 5 -n 0",
                                "sample" + ck + " --prompt the --generate 5 --stop ''", "sample" + ck + " --prompt the -n 3"}) {
    r = run_lmtrain(bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_EQ(r.output.find("rank"), std::string::npos) << r.output;
  }
  // top-k 0 samples from all tokens
  r = run_lmtrain("sample" + ck + " --prompt the --generate 5 --top-k 0 --top-p 0.9 --rows 3 -n 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sample 2 of 2: 5 tokens"), std::string::npos) << r.output;
  r = run_lmtrain("sample" + ck + " --prompt the --generate 20 --bench 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("speed-up"), std::string::npos) << r.output;

  r = run_lmtrain("inspect params" + ck);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tied head"), std::string::npos) << r.output;

  r = run_lmtrain("inspect shapes" + ck);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* stage : {"[2, 16]", "[2, 16, 32]", "blocks.1", "[2, 16, 128]", "loss", "int64", "float32"}) {
    EXPECT_NE(r.output.find(stage), std::string::npos) << stage << "\n" << r.output;
  }
  r = run_lmtrain("train --dry-run -c " + cfg.string() + " --set run.dir=" + (dir / "fresh").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_row(r.output, {"logits", "[4,", "16,", "128]"})) << r.output;
  EXPECT_FALSE(fs::exists(dir / "fresh" / "latest"));
}

TEST(Inspect, TokenizerStatsComparesSizesOnEnglishAndKorean) {
  auto r = run_lmtrain("tokenizer stats --corpus " + data_file("tiny_en.txt").string() + " --sizes 60,120,100000 --heldout-every 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tok/char"), std::string::npos) << r.output;
  EXPECT_TRUE(has_row(r.output, {"100000", "not", "trainable", "on", "this"})) << r.output;
  // bytes per token: more than one for English pieces, and more for the bigger vocabulary's longer pieces.
  std::map<int, double> bytes_per_token;
  std::istringstream rows(r.output);
  for (std::string line; std::getline(rows, line);) {
    std::istringstream row(line);
    int vocab = 0;
    double per_char = 0, per_word = 0, per_token = 0;
    if (row >> vocab >> per_char >> per_word >> per_token) bytes_per_token[vocab] = per_token;
  }
  ASSERT_EQ(bytes_per_token.count(60), 1u) << r.output;
  ASSERT_EQ(bytes_per_token.count(120), 1u) << r.output;
  EXPECT_GT(bytes_per_token[60], 1.0) << r.output;
  EXPECT_GT(bytes_per_token[120], bytes_per_token[60]) << r.output;
  r = run_lmtrain("tokenizer stats --corpus " + data_file("tiny_ko.txt").string() + " --sizes 80,120 --heldout-every 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_row(r.output, {"80"})) << r.output;
  r = run_lmtrain("tokenizer stats --corpus " + data_file("tiny_en.txt").string() + " --sizes 60,abc");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace lm::test
