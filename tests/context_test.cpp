// Base and context-aware coordinates (inspect context) and sentence vectors (embed): the same id is the same
// row, positions and blocks separate occurrences, the logit lens's last depth is inspect probs, every vector
// equals an independent Python forward (scripts/check_forward.py), the query cache is reused and
// invalidated, and bad input is refused without losing a file.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "inspect/context.h"
#include "inspect/embed.h"
#include "inspect/probs.h"
#include "sample/sampler.h"
#include "test_util.h"
#include "util/errors.h"
#include "util/hash.h"

namespace lm::test {

namespace {

// The cosine at depth `depth` of the first pair of `r`.
double first_pair(const inspect::ContextReport& r, size_t depth) { return r.cosines.at(0).at(depth); }

std::string check_forward(const std::string& args) {
  auto r = run_command("/usr/bin/python3 " + std::string(LMTRAIN_SOURCE_DIR) + "/scripts/check_forward.py " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("max |v_python - v_lmtrain|"), std::string::npos) << r.output;
  return r.output;
}

}  // namespace

TEST(Context, TheSameIdIsTheSameRowAndPositionsOrContextSeparateIt) {
  tokenizer::Tokenizer tok(english_tokenizer_path());
  const int32_t s = tok.eos_id();
  EXPECT_EQ(inspect::shared_pieces({{s, 7, 9, 11}, {s, 9, 7, 12}, {s, 5}}), (std::vector<int32_t>{7, 9}));
  EXPECT_THROW(inspect::context_pieces(tok, {{s, 7}, {s, 9}}, ""), ConfigError);

  torch::manual_seed(5);
  model::Gpt learned(tiny_config(128));
  // piece 7 at position 1 in one text and 2 in the other
  auto r = inspect::context_report(*learned, tok, {{s, 7, 9, 11}, {s, 9, 7, 12}}, 7, 3, 4);
  ASSERT_EQ(r.occurrences.size(), 2u);
  ASSERT_EQ(r.depths, (std::vector<std::string>{"input row", "input", "block 0", "block 1", "final"}));
  EXPECT_EQ(first_pair(r, 0), 1.0) << "the same id is the same row, exactly";
  EXPECT_LT(first_pair(r, 1), 0.999) << "learned positions 1 and 2 differ";
  EXPECT_EQ(r.occurrences[0].nearest_input.size(), 4u);
  EXPECT_NE(r.occurrences[0].nearest_input[0].id, 7) << "the row itself is left out";
  EXPECT_THROW(inspect::context_report(*learned, tok, {{s, 7, 9}, {s, 9, 11}}, 7, 3, 4), ConfigError) << "one occurrence";

  // the logit lens at the last depth is what inspect probs reads at that position
  const std::vector<int32_t> ids = {s, 7, 9, 11};
  const auto rows = inspect::teacher_forced(*learned, tok, ids, 3);
  for (int d : {0, 1}) {
    const auto& lens = r.occurrences[0].lens.back();
    ASSERT_EQ(lens.size(), 3u);
    EXPECT_EQ(lens[static_cast<size_t>(d)].id, rows[1].top[static_cast<size_t>(d)].id);
    EXPECT_NEAR(lens[static_cast<size_t>(d)].prob, rows[1].top[static_cast<size_t>(d)].prob, 1e-9);
  }

  torch::manual_seed(6);
  model::Gpt sinusoidal(tiny_config(128, true, model::Positions::kSinusoidal));
  auto same = inspect::context_report(*sinusoidal, tok, {{s, 7, 9}, {s, 7, 12}}, 7, 3, 3);
  for (size_t d = 0; d < same.depths.size(); ++d) {
    EXPECT_EQ(first_pair(same, d), 1.0) << same.depths[d] << ": the same position after the same prefix (causal)";
  }
  auto moved = inspect::context_report(*sinusoidal, tok, {{s, 7, 9}, {s, 12, 7}}, 7, 3, 3);
  EXPECT_EQ(first_pair(moved, 0), 1.0);
  EXPECT_LT(first_pair(moved, 1), 0.999) << "sinusoidal positions 1 and 2 differ";

  torch::manual_seed(7);
  model::Gpt rope(tiny_config(128, true, model::Positions::kRope));
  auto rotated = inspect::context_report(*rope, tok, {{s, 7, 9}, {s, 12, 7}}, 7, 3, 3);
  EXPECT_EQ(first_pair(rotated, 1), 1.0) << "rope adds nothing to the input: positions act inside attention";
  EXPECT_LT(first_pair(rotated, 2), 1.0) << "block 0 sees another prefix";
}

TEST(Context, EveryVectorMatchesAnIndependentPythonForward) {
  ScratchDir dir("context-cli");
  for (const std::string positions : {"learned", "rope"}) {
    RunSpec spec;
    spec.run = positions;
    spec.model += ", positions: " + positions;
    ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, spec).string()).exit_code, 0);
    const fs::path json = dir / (positions + ".json");
    auto r = run_lmtrain("inspect context --checkpoint " + (dir / positions).string() +
                         " --text 'The river runs to the sea' --text 'the sea is wide and the river is long' -k 3 --json " +
                         json.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("cosine between occurrences"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("logit lens"), std::string::npos) << r.output;
    const auto report = nlohmann::json::parse(slurp(json));
    ASSERT_GE(report["pieces"].size(), 1u);
    for (const auto& piece : report["pieces"]) {
      for (const auto& pair : piece["pairs"]) EXPECT_EQ(pair["cosine"][0].get<double>(), 1.0) << piece["piece"];
    }
    check_forward(checkpoint::resolve_checkpoint(dir / positions).string() + " --context " + json.string());
  }
  // one text with a piece twice is enough when the piece is named; a text over the context is refused
  auto r = run_lmtrain("inspect context --checkpoint " + (dir / "learned").string() + " --text 'the sea and the sea' --piece the");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_lmtrain("inspect context --checkpoint " + (dir / "learned").string() + " --text 'the sea'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_lmtrain("inspect context --checkpoint " + (dir / "learned").string() +
                  " --text 'the river and the sea and the river and the sea and the river' --text 'the river'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("shorten the text"), std::string::npos) << r.output;
  // an empty text is said to be empty, not too long
  r = run_lmtrain("inspect probs --checkpoint " + (dir / "learned").string() + " --text ''");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("got an empty text"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("shorten the text"), std::string::npos) << r.output;
}

TEST(Embed, PoolsMatchPythonAreDeterministicAndWriteEveryFormat) {
  ScratchDir dir("embed");
  RunSpec spec;
  ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, spec).string()).exit_code, 0);
  // fp32: the Python forward is fp32 (auto runs bf16 products where they are faster, e.g. on an AVX512-BF16 EPYC)
  const std::string ck = " --checkpoint " + (dir / "run").string() + " --precision fp32";
  const fs::path lines = dir / "lines.txt";
  const std::vector<std::string> texts = {"The river runs to the sea.", "He carried a small lamp.", "the lamp",
                                          "At the top of the tower he cleaned the glass and trimmed the wick, and then he "
                                          "went down the stairs again."};
  {
    std::ofstream out(lines);
    for (const auto& t : texts) out << t << "\n";
  }
  // each text's ids as embed reads them (the line start, the pieces, cut to the context)
  const std::string step = checkpoint::resolve_checkpoint(dir / "run").string();
  const auto loaded = checkpoint::load_checkpoint(step);
  tokenizer::Tokenizer tok(loaded.tokenizer_model);
  const fs::path ids = dir / "ids.txt";
  int cut = 0;
  {
    std::ofstream out(ids);
    for (const auto& t : texts) {
      auto v = sample::prompt_context(tok, t);
      if (static_cast<int64_t>(v.size()) > loaded.arch.max_seq_len) {
        v.resize(static_cast<size_t>(loaded.arch.max_seq_len));
        ++cut;
      }
      for (int32_t id : v) out << id << " ";
      out << "\n";
    }
  }
  ASSERT_GE(cut, 1) << "the last text is longer than T=16";
  for (const std::string pool : {"mean", "weighted", "last", "from-input"}) {
    const fs::path npy = dir / (pool + ".npy");
    const std::string flag = pool == "from-input" ? " --from-input" : " --pool " + pool;
    auto r = run_lmtrain("embed" + ck + " --file " + lines.string() + flag + " --batch 3 --out " + npy.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(std::to_string(cut) + " of 4 lines were longer than the context"), std::string::npos) << r.output;
    check_forward(step + " --embed " + npy.string() + " --ids " + ids.string() + " --pool " + pool);
  }
  auto r = run_lmtrain("embed" + ck + " --file " + lines.string() + " --layer 1 --out " + (dir / "l1.npy").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  check_forward(step + " --embed " + (dir / "l1.npy").string() + " --ids " + ids.string() + " --layer 1");

  // safetensors: the same bytes twice, the lines' hash and the options in the metadata
  const fs::path a = dir / "a.safetensors", b = dir / "b.safetensors";
  ASSERT_EQ(run_lmtrain("embed" + ck + " --file " + lines.string() + " --out " + a.string()).exit_code, 0);
  ASSERT_EQ(run_lmtrain("embed" + ck + " --file " + lines.string() + " --batch 1 --out " + b.string()).exit_code, 0);
  const auto st = checkpoint::read_safetensors(a), st_b = checkpoint::read_safetensors(b);
  ASSERT_EQ(st.tensors.size(), 1u);
  EXPECT_EQ(st.tensors[0].first, "embeddings");
  EXPECT_EQ(st.tensors[0].second.sizes(), (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(st.metadata.at("format"), "lmtrain-embed");
  EXPECT_EQ(st.metadata.at("lines_sha256"), util::sha256_file(lines));
  EXPECT_EQ(st.metadata.at("options"), "pool=mean layer=final");
  EXPECT_LT((st.tensors[0].second - st_b.tensors[0].second).abs().max().item<double>(), 1e-5) << "batching changes nothing";
  const std::string first = slurp(a);
  ASSERT_EQ(run_lmtrain("embed" + ck + " --file " + lines.string() + " --out " + a.string()).exit_code, 0);
  EXPECT_EQ(slurp(a), first) << "deterministic, bit for bit";

  // TSV for the Embedding Projector: one row of C numbers per text, the texts beside it
  r = run_lmtrain("embed" + ck + " --text 'the river' --text 'the sea' --out " + (dir / "p.tsv").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string tsv = slurp(dir / "p.tsv");
  EXPECT_EQ(std::count(tsv.begin(), tsv.end(), '\n'), 2);
  EXPECT_EQ(std::count(tsv.begin(), tsv.begin() + static_cast<std::ptrdiff_t>(tsv.find('\n')), '\t'), 31);
  EXPECT_EQ(slurp(dir / "p.metadata.tsv"), "the river\nthe sea\n");
  r = run_lmtrain("embed" + ck + " --text \"$(printf 'the\\nriver')\" --text 'the sea' --out " + (dir / "p.tsv").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(slurp(dir / "p.metadata.tsv"), "the river\nthe sea\n") << "one line per vector";

  // a query that reads the cache still records the lines it cut
  for (int run = 0; run < 2; ++run) {
    r = run_lmtrain("embed" + ck + " --file " + lines.string() + " --query 'the lamp' -k 1 --out " + a.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(checkpoint::read_safetensors(a).metadata.at("cut"), std::to_string(cut)) << "run " << run << "\n" << r.output;
  }
}

TEST(Embed, TheQueryCacheIsReusedAndInvalidatedAndBadInputIsRefused) {
  ScratchDir dir("embed-query");
  RunSpec spec;
  ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, spec).string()).exit_code, 0);
  const std::string ck = " --checkpoint " + (dir / "run").string();
  const fs::path lines = dir / "lines.txt";
  std::ofstream(lines) << "The river runs to the sea.\nHe carried a small lamp.\nthe lamp and the oil\nAt the top of the tower\n";
  const std::string query = "embed" + ck + " --file " + lines.string() + " -k 2 --query 'He carried a small lamp.'";
  auto r = run_lmtrain(query);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cached the vectors of 4 lines"), std::string::npos) << r.output;
  EXPECT_TRUE(has_row(r.output, {"1", "1.0000", "line", "2", "He", "carried"})) << "a line is nearest to itself\n" << r.output;
  EXPECT_TRUE(fs::exists(inspect::cache_path(lines)));
  r = run_lmtrain(query);
  EXPECT_NE(r.output.find("reusing the cached vectors"), std::string::npos) << r.output;
  r = run_lmtrain(query + " --pool last");
  EXPECT_NE(r.output.find("from another file, checkpoint or options"), std::string::npos) << r.output;
  std::ofstream(lines, std::ios::app) << "and the glass\n";
  r = run_lmtrain(query + " --pool last");
  EXPECT_NE(r.output.find("from another file, checkpoint or options"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cached the vectors of 5 lines"), std::string::npos) << r.output;

  // refusals: exit code, a clear line, nothing overwritten
  const fs::path empty = dir / "empty.txt", bad = dir / "bad.txt", blank = dir / "blank.txt", keep = dir / "keep.npy";
  std::ofstream(empty) << "";
  std::ofstream(bad) << "good\n\xff\xfe bad\n";
  std::ofstream(blank) << "one\n\ntwo\n";
  std::ofstream(keep) << "a good file";
  // files that look a little like ours: a 1-D float32 .npy, a .tsv with a line of words, someone's metadata.tsv
  const fs::path vec1d = dir / "v1d.npy", scores = dir / "scores.tsv", mine = dir / "mine.tsv";
  std::ofstream(vec1d) << "\x93NUMPY\x01" << '\0' << "v\0{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n";
  std::ofstream(scores) << "1\t2\t3\nname\tfoo\n";
  std::ofstream(mine) << "1\t2\n";
  std::ofstream(dir / "mine.metadata.tsv") << "precious\nother\nfile\n";
  const std::string vec1d_bytes = slurp(vec1d);
  const std::string out = " --out " + (dir / "v.npy").string();
  struct Bad {
    std::string args;
    int code;
    std::string says;
  };
  for (const auto& [args, code, says] : std::vector<Bad>{
           {" --file " + empty.string() + out, 3, "holds no text"},
           {" --file " + bad.string() + out, 3, bad.string() + ":2:"},
           {" --file " + blank.string() + out, 3, "line 2 is blank"},
           {" --file " + lines.string() + " --layer 3" + out, 2, "--layer: expected 0..2"},
           {" --file " + lines.string() + " --layer 1 --from-input" + out, 2, "--from-input"},
           {" --file " + lines.string() + " --pool max" + out, 2, "--pool"},
           {" --file " + lines.string() + " --out " + keep.string(), 2, "not overwritten"},
           {" --file " + lines.string() + " --out " + (dir / "v.bin").string(), 2, ".safetensors, .npy or .tsv"},
           {" --file " + lines.string() + " --query 'the' -k 9", 2, "-k: expected 1..5"},
           {" --text 'the river' --query 'the'", 2, "expected --file"},
           {" --file " + lines.string() + " --query ''", 2, "--query: expected text"},
           {" --file " + lines.string() + " --from-input --pool last" + out, 2, "--from-input: expected no --layer or --pool"},
           {" --file " + lines.string() + " --out " + (dir / "no" / "such" / "v.npy").string(), 2, "existing directory"},
           {" --file " + lines.string() + " --out " + vec1d.string(), 2, "not overwritten"},
           {" --file " + lines.string() + " --out " + scores.string(), 2, "not overwritten"},
           {" --file " + lines.string() + " --out " + mine.string(), 2, "mine.metadata.tsv"},
           {out, 2, "exactly one of --file or --text"}}) {
    r = run_lmtrain("embed" + ck + args);
    EXPECT_EQ(r.exit_code, code) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_EQ(slurp(keep), "a good file");
  EXPECT_EQ(slurp(vec1d), vec1d_bytes);
  EXPECT_EQ(slurp(scores), "1\t2\t3\nname\tfoo\n");
  EXPECT_EQ(slurp(dir / "mine.metadata.tsv"), "precious\nother\nfile\n");
  EXPECT_FALSE(fs::exists(dir / "v.npy"));
  r = run_lmtrain("inspect context" + ck + " --text 'the sea' --text 'the river' --json " + (dir / "no" / "x.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.find("cosine between"), std::string::npos) << "refused before anything is printed\n" << r.output;
}

}  // namespace lm::test
