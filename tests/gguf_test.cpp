// `lmtrain export --format gguf`: the file against the format (scripts/read_gguf.py, an independent numpy
// reader), then in llama.cpp itself (scripts/check_gguf.mjs on node-llama-cpp's prebuilt binaries): every
// position's probabilities, the tokenization of the text, and a greedy continuation, for learned/tied,
// sinusoidal/untied and sqrt_d/untied models, f32 and q8_0 (and f16 for the first); the refusals; and the
// byte-fallback tokenizer that llama.cpp needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "test_util.h"
#include "tokenizer/model_spec.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"

namespace lm::test {

namespace {

const std::string kText = "And the river flowed to the sea, and the land was green.";

// A 40-step tiny model (enough that its probabilities are far from uniform) with a byte-fallback
// tokenizer and these extra keys.
fs::path train_for_gguf(const ScratchDir& dir, const std::string& run, const std::string& model_keys,
                        const std::string& tokenizer_keys = "", int d_model = 64) {
  RunSpec spec;
  spec.run = run;
  spec.tokenizer = "vocab_size: 320, byte_fallback: true" + tokenizer_keys;
  // T 96: kText and a 32-token continuation fit; C 64: q8_0's narrowest rows (export/gguf.cpp kQ8MinWidth)
  spec.model = "d_model: " + std::to_string(d_model) + ", n_layers: 2, n_heads: 2, max_seq_len: 96, " + model_keys;
  spec.train = "batch_size: 8, max_steps: 40, warmup_steps: 4, lr: 0.01, eval_every: 0";
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / run;
}

std::string script(const std::string& name) { return std::string(LMTRAIN_SOURCE_DIR) + "/scripts/" + name; }

// scripts/check_gguf.mjs on `args`; `skip` gets the reason when llama.cpp cannot run here (no node: the shell's
// 127; node-llama-cpp not installed: the script's 77).
RunResult check_in_llama_cpp(const std::string& args, std::string& skip) {
  auto r = run_command("node " + script("check_gguf.mjs") + " --modules " + LMTRAIN_BUILD_DIR +
                       "/llama-node/node_modules " + args);
  if (r.exit_code == 127) skip = "node is not on PATH (the check needs node >= 20)";
  if (r.exit_code == 77) skip = r.output;
  return r;
}

// The ids lmtrain's greedy sampler generates after kText.
std::string greedy_ids(const fs::path& run, int n) {
  auto r = run_lmtrain("sample --checkpoint " + run.string() + " --prompt '" + kText + "' --generate " + std::to_string(n) +
                       " --temperature 0 --show-ids --precision fp32");  // llama.cpp computes in fp32
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto at = r.output.find("\nids:");
  return at == std::string::npos ? "" : r.output.substr(at + 5, r.output.find('\n', at + 1) - at - 5);
}

}  // namespace

TEST(Gguf, ExportsMatchTheCheckpointAndLlamaCppComputesLmtrainsProbabilities) {
  ScratchDir dir("gguf");
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"learned_tied", "positions: learned, tie_embeddings: true"},
      {"sin_untied", "positions: sinusoidal, tie_embeddings: false"},
      {"sqrtd_untied", "positions: learned, tie_embeddings: false, embedding_scale: sqrt_d"}};
  std::string skipped;
  for (const auto& [name, keys] : variants) {
    const fs::path run = train_for_gguf(dir, name, keys, name == "sin_untied" ? ", normalization: identity" : "");
    auto r = run_lmtrain("inspect probs --checkpoint " + run.string() + " --text '" + kText + "' --json -k 10");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ofstream(dir / (name + ".json")) << r.output.substr(r.output.find('['));
    const std::string expect = greedy_ids(run, 32);
    ASSERT_FALSE(expect.empty());
    const fs::path ckpt = run / slurp(run / "latest").substr(0, 13);
    const auto spec = tokenizer::read_model_spec(ckpt / "tokenizer.model");
    EXPECT_EQ(spec.normalization, name == "sin_untied" ? "identity" : "nmt_nfkc");
    EXPECT_EQ(spec.remove_extra_whitespaces, name != "sin_untied");
    // The tolerances are the measured gaps (docs/llama-cpp.md "Checking an export") with room: llama.cpp's
    // gpt2 graph uses the tanh GELU, and q8_0 rounds every weight.
    // f16 is one encoding of every tensor alike: one variant shows it (each llama.cpp run costs seconds)
    std::vector<std::pair<std::string, std::string>> types = {{"f32", "2e-3"}, {"q8_0", "2e-2"}};
    if (name == "learned_tied") types.emplace_back("f16", "2e-3");
    for (const auto& [type, tolerance] : types) {
      const fs::path gguf = dir / (name + "." + type + ".gguf");
      r = run_lmtrain("export --checkpoint " + run.string() + " --format gguf --type " + type + " --out " + gguf.string());
      ASSERT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("wrote " + gguf.string()), std::string::npos) << r.output;
      r = run_command("/usr/bin/python3 " + script("read_gguf.py") + " --check " + gguf.string() + " " + ckpt.string());
      EXPECT_EQ(r.exit_code, 0) << name << " " << type << ": " << r.output;
      r = check_in_llama_cpp("--model " + gguf.string() + " --probs " + (dir / (name + ".json")).string() + " --tolerance " +
                             tolerance + " --text '" + kText + "'" + (type == "f32" ? " --greedy 32 --expect '" + expect + "'" : ""),
                             skipped);
      if (!skipped.empty()) continue;
      EXPECT_EQ(r.exit_code, 0) << name << " " << type << ": " << r.output;
      EXPECT_NE(r.output.find("check_gguf: ok"), std::string::npos) << r.output;
      std::cout << name << " " << type << ": " << r.output;
    }
  }
  if (!skipped.empty()) GTEST_SKIP() << "the llama.cpp half: " << skipped;
}

TEST(Gguf, RefusesWhatLlamaCppsGpt2CannotComputeAndKeepsAForeignOutFile) {
  ScratchDir dir("gguf_bad");
  const fs::path tied = train_for_gguf(dir, "sqrtd_tied", "tie_embeddings: true, embedding_scale: sqrt_d");
  auto r = run_lmtrain("export --checkpoint " + tied.string() + " --format gguf --out " + (dir / "a.gguf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("[export] gguf: expected a model llama.cpp's gpt2 can express, got embedding_scale sqrt_d with "
                          "a tied head"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "a.gguf"));
  const fs::path rope = train_for_gguf(dir, "rope", "positions: rope");
  r = run_lmtrain("export --checkpoint " + rope.string() + " --format gguf --out " + (dir / "r.gguf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("got positions rope"), std::string::npos) << r.output;
  const fs::path good = train_for_gguf(dir, "good", "positions: learned");
  std::ofstream(dir / "notes.txt") << "my notes\n";
  r = run_lmtrain("export --checkpoint " + good.string() + " --format gguf --out " + (dir / "notes.txt").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("which is not a GGUF file (kept as it is)"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir / "notes.txt"), "my notes\n");
  fs::create_directories(dir / "adir");
  r = run_lmtrain("export --checkpoint " + good.string() + " --format gguf --out " + (dir / "adir").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("a directory (kept as it is)"), std::string::npos) << r.output;
  r = run_lmtrain("export --checkpoint " + good.string() + " --format gguf --out " + (dir / "g.gguf").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the tokenizer normalises text (nfkc, repeated spaces dropped)"), std::string::npos) << r.output;
  r = run_lmtrain("export --checkpoint " + good.string() + " --format gguf --type f16 --out " + (dir / "g.gguf").string());
  EXPECT_EQ(r.exit_code, 0) << "an earlier export is replaced: " << r.output;
  EXPECT_EQ(run_command("/usr/bin/python3 " + script("read_gguf.py") + " --check " + (dir / "g.gguf").string() + " " +
                        (good / slurp(good / "latest").substr(0, 13)).string()).exit_code, 0);
  r = run_lmtrain("export --checkpoint " + (dir / "nowhere").string() + " --format gguf --out " + (dir / "n.gguf").string());
  EXPECT_EQ(r.exit_code, 4) << r.output;
  r = run_lmtrain("export --checkpoint " + good.string() + " --format hf --type q8_0 --out " + (dir / "hf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--type: expected --format gguf"), std::string::npos) << r.output;
  r = run_lmtrain("export --checkpoint " + good.string() + " --format gguf --type q4 --out " + (dir / "q.gguf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const fs::path wide = train_for_gguf(dir, "c80", "positions: learned", "", 80);  // 80 = 2.5 blocks of 32
  r = run_lmtrain("export --checkpoint " + wide.string() + " --format gguf --type q8_0 --out " + (dir / "w.gguf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected rows of a multiple of 32 values"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "w.gguf"));
  std::ofstream(dir / "junk.model") << "not a protobuf \xff\xff\xff";
  try {
    tokenizer::read_model_spec(dir / "junk.model");
    ADD_FAILURE() << "a junk model was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a SentencePiece model"), std::string::npos) << e.what();
  }
  // A tokenizer without byte pieces still exports, with the warning that llama.cpp aborts on unknown characters.
  RunSpec spec;
  spec.run = "nobytes";
  const fs::path nobytes = dir / "nobytes";
  ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, spec).string()).exit_code, 0);
  r = run_lmtrain("export --checkpoint " + nobytes.string() + " --format gguf --type q8_0 --out " + (dir / "nb.gguf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("gguf q8_0: expected d_model >= 64, got 32"), std::string::npos) << r.output;
  r = run_lmtrain("export --checkpoint " + nobytes.string() + " --format gguf --out " + (dir / "nb.gguf").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no byte pieces: llama.cpp aborts on any character outside its vocabulary"), std::string::npos)
      << r.output;
}

// The Korean FAQ's tokenizer knows no "밥": with byte pieces it is three bytes and decodes back exactly, and
// llama.cpp tokenizes a Korean sentence as lmtrain does.
TEST(Gguf, ByteFallbackTokenizerOfTheKoreanFaqHasNoUnknownPiece) {
  const fs::path faq = "/usr/share/doc/debian/FAQ/debian-faq.ko.txt.gz";
  if (!fs::exists(faq)) GTEST_SKIP() << faq << " is missing (scripts/setup.sh installs debian-faq-ko)";
  ScratchDir dir("gguf_ko");
  ASSERT_EQ(run_command("zcat " + faq.string() + " > " + (dir / "faq.txt").string()).exit_code, 0);
  const std::string sentence = "나는 밥을 먹었다";
  for (const bool bytes : {true, false}) {
    tokenizer::TokenizerConfig cfg;
    cfg.vocab_size = 4096;
    cfg.byte_fallback = bytes;
    const fs::path model = dir / (bytes ? "bytes.model" : "plain.model");
    tokenizer::train_tokenizer({dir / "faq.txt"}, model, cfg, 2);
    tokenizer::Tokenizer tok(model);
    const auto ids = tok.encode(sentence);
    const bool has_unk = std::find(ids.begin(), ids.end(), tok.unk_id()) != ids.end();
    EXPECT_EQ(has_unk, !bytes) << "byte_fallback " << bytes;
    if (bytes) {
      EXPECT_EQ(tok.decode(ids), sentence);
      int byte_pieces = 0;
      for (int32_t id : ids) byte_pieces += tok.piece(id).rfind("<0x", 0) == 0;
      EXPECT_EQ(byte_pieces, 3) << "밥 is three UTF-8 bytes";
    }
    const auto spec = tokenizer::read_model_spec(model);
    EXPECT_EQ(spec.byte_fallback, bytes);
    EXPECT_EQ(spec.algorithm, "bpe");
    EXPECT_EQ(spec.normalization, "nmt_nfkc");
    ASSERT_EQ(static_cast<int32_t>(spec.pieces.size()), tok.vocab_size());
    int byte_types = 0;
    for (size_t i = 0; i < spec.pieces.size(); ++i) {
      EXPECT_EQ(spec.pieces[i].piece, tok.piece(static_cast<int32_t>(i)));
      byte_types += spec.pieces[i].type == tokenizer::PieceType::kByte;
    }
    EXPECT_EQ(byte_types, bytes ? 256 : 0);
  }
  // A model of the FAQ in llama.cpp: its tokenization of a Korean sentence, byte pieces included, is lmtrain's.
  RunSpec spec;
  spec.run = "ko";
  spec.train_text = (dir / "faq.txt").string();  // absolute: data_file() keeps it
  spec.val_text = "";
  spec.tokenizer = "vocab_size: 4096, byte_fallback: true";
  spec.model = "d_model: 64, n_layers: 1, n_heads: 2, max_seq_len: 64";
  ASSERT_EQ(run_lmtrain("train -c " + write_run_config(dir, spec).string()).exit_code, 0);
  const std::string korean = "데비안은 자유 소프트웨어입니다. " + sentence;
  auto r = run_lmtrain("inspect probs --checkpoint " + (dir / "ko").string() + " --text '" + korean + "' --json -k 10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ofstream(dir / "ko.json") << r.output.substr(r.output.find('['));
  ASSERT_EQ(run_lmtrain("export --checkpoint " + (dir / "ko").string() + " --format gguf --out " + (dir / "ko.gguf").string()).exit_code, 0);
  std::string skipped;
  r = check_in_llama_cpp("--model " + (dir / "ko.gguf").string() + " --probs " + (dir / "ko.json").string() +
                         " --tolerance 2e-3 --text '" + korean + "'", skipped);
  if (!skipped.empty()) GTEST_SKIP() << "the llama.cpp half: " << skipped;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenize: llama.cpp's"), std::string::npos) << r.output;
}

// A fine-tune that appended Korean pieces exports its larger vocabulary: llama.cpp tokenizes a Korean sentence
// into lmtrain's ids, new pieces among them, and computes its probabilities; the HF directory's independent
// forward agrees too.
TEST(Gguf, AFinetuneWithNewPiecesExportsItsLargerVocabulary) {
  ScratchDir dir("gguf_new_pieces");
  const fs::path pre = train_for_gguf(dir, "pre", "positions: learned, tie_embeddings: true");
  RunSpec spec;
  spec.run = "ft";
  spec.train_text = spec.val_text = "tiny_ko.txt";  // one file: held-out lines would not fill the 96-token window
  spec.tokenizer = spec.model = "";
  spec.train = "batch_size: 4, max_steps: 10, warmup_steps: 1, lr: 0.01, eval_every: 0";
  spec.extra = "finetune: {new_pieces: 40, freeze_embeddings: old, original_val: " + data_file("tiny_en_val.txt").string() + "}\n";
  auto r = run_lmtrain("finetune --from " + pre.string() + " -c " + write_run_config(dir, spec).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path ft = dir / "ft";
  tokenizer::Tokenizer tok(ft / "tokenizer.model");
  const std::string korean = "오늘은 날씨가 좋아서 공원에 산책을 갔다";
  const auto ids = tok.encode(korean);
  const int32_t old_vocab = tokenizer::Tokenizer(pre / "tokenizer.model").vocab_size();
  EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return id >= old_vocab; })) << "no new piece used";
  r = run_lmtrain("inspect probs --checkpoint " + ft.string() + " --text '" + korean + "' --json -k 10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ofstream(dir / "ft.json") << r.output.substr(r.output.find('['));
  ASSERT_EQ(run_lmtrain("export --checkpoint " + ft.string() + " --format hf --out " + (dir / "ft-hf").string()).exit_code, 0);
  r = run_command("/usr/bin/python3 " + script("check_hf_export.py") + " " + (dir / "ft-hf").string() + " " +
                  (dir / "ft.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(run_lmtrain("export --checkpoint " + ft.string() + " --format gguf --out " + (dir / "ft.gguf").string()).exit_code, 0);
  r = run_command("/usr/bin/python3 " + script("read_gguf.py") + " --check " + (dir / "ft.gguf").string() + " " +
                  (ft / "step_00000010").string());  // every tensor as the checkpoint's, one token per id
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::string skipped;
  r = check_in_llama_cpp("--model " + (dir / "ft.gguf").string() + " --probs " + (dir / "ft.json").string() +
                         " --tolerance 2e-3 --text '" + korean + "'", skipped);
  if (!skipped.empty()) GTEST_SKIP() << "the llama.cpp half: " << skipped;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenize: llama.cpp's"), std::string::npos) << r.output;
}

}  // namespace lm::test
