// New vocabulary in a fine-tune (finetune.new_pieces): the extended tokenizer keeps every old id, its new
// pieces are reachable by SentencePiece's own BPE, their rows start where the rule says, `old` freezing keeps
// the old rows bit-identical, resume is bitwise, exports carry the larger vocabulary, and bad requests are
// refused with exit 2.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "test_util.h"
#include "tokenizer/extend.h"
#include "tokenizer/model_spec.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"

namespace lm::test {

namespace {

const std::string kWordStart = "\xE2\x96\x81";

// A BPE tokenizer of tiny_en.txt with byte pieces: Korean reads as bytes.
fs::path english_model(const ScratchDir& dir, tokenizer::ModelType type = tokenizer::ModelType::kBpe) {
  tokenizer::TokenizerConfig cfg;
  cfg.vocab_size = 400;
  cfg.byte_fallback = true;
  cfg.model_type = type;
  const fs::path model = dir / (type == tokenizer::ModelType::kBpe ? "en.model" : "en-unigram.model");
  tokenizer::train_tokenizer({data_file("tiny_en.txt")}, model, cfg, 1);
  return model;
}

std::unordered_map<std::string, float> mergeable(const tokenizer::ModelSpec& s) {
  std::unordered_map<std::string, float> m;
  for (const auto& p : s.pieces) {
    if (p.type == tokenizer::PieceType::kNormal) m.emplace(p.piece, p.score);
  }
  return m;
}

// What the text of a piece is when typed: U+2581 read as a space.
std::string surface(std::string piece) {
  for (size_t at; (at = piece.find(kWordStart)) != std::string::npos;) piece.replace(at, kWordStart.size(), " ");
  return piece;
}

// Pretrains 4 steps on tiny_en.txt with the byte-piece tokenizer; returns the run directory.
fs::path pretrain(const ScratchDir& dir) {
  RunSpec spec;
  spec.run = "pre";
  spec.tokenizer = "vocab_size: 400, byte_fallback: true";
  auto r = run_lmtrain("train -c " + write_run_config(dir, spec).string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / "pre";
}

// The arguments of a fine-tune of `from` on tiny_ko.txt into dir/<run>.
std::string finetune_ko_args(const ScratchDir& dir, const fs::path& from, const std::string& run, const std::string& extra) {
  RunSpec spec;
  spec.run = run;
  spec.train_text = "tiny_ko.txt";
  spec.val_text = "";
  spec.tokenizer = spec.model = "";
  spec.train = "batch_size: 4, max_steps: 5, warmup_steps: 1, lr: 0.01, eval_every: 0";
  spec.extra = "finetune: {drift_top_k: 3, original_val: " + data_file("tiny_en_val.txt").string() + "}\n";
  return "finetune --from " + from.string() + " -c " + write_run_config(dir, spec).string() + " " + extra;
}

RunResult finetune_ko(const ScratchDir& dir, const fs::path& from, const std::string& run, const std::string& extra) {
  return run_lmtrain(finetune_ko_args(dir, from, run, extra));
}

torch::Tensor table(const fs::path& ckpt) {
  auto c = checkpoint::load_checkpoint(ckpt);
  return c.model->tok_emb->weight.detach().clone();
}

}  // namespace

// bpe_segment is SentencePiece's BPE: on real text its pieces are the library's.
TEST(NewPieces, BpeSegmentIsSentencePiecesEncoding) {
  ScratchDir dir("np_bpe");
  const fs::path model = english_model(dir);
  tokenizer::Tokenizer tok(model);
  const auto m = mergeable(tokenizer::read_model_spec(model));
  std::istringstream lines(slurp(data_file("tiny_en_val.txt")));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.find("  ") != std::string::npos) continue;
    std::vector<std::string> want;
    for (int32_t id : tok.encode(line)) want.push_back(tok.piece(id));
    std::string text = kWordStart + line;  // nmt_nfkc on ASCII: a word start first, each space a word start
    for (size_t at; (at = text.find(' ')) != std::string::npos;) text.replace(at, 1, kWordStart);
    EXPECT_EQ(tokenizer::bpe_segment(text, m), want) << line;
    ++checked;
  }
  EXPECT_GT(checked, 3);
}

// The extension keeps every old id, decodes old ids as before, and each new piece encodes alone to its id.
TEST(NewPieces, ExtensionKeepsOldIdsAndEveryNewPieceIsReachable) {
  ScratchDir dir("np_ext");
  const fs::path old_model = english_model(dir), ext = dir / "ext.model";
  tokenizer::TokenizerConfig cfg;
  cfg.byte_fallback = true;
  const auto [e, made] = tokenizer::ensure_extended_tokenizer(old_model, {data_file("tiny_ko.txt")}, {40, {}}, cfg, 1, 3, ext);
  EXPECT_TRUE(made);
  tokenizer::Tokenizer old_tok(old_model), new_tok(ext);
  ASSERT_EQ(e.old_vocab, old_tok.vocab_size());
  ASSERT_GE(e.pieces.size(), 40u);
  EXPECT_EQ(new_tok.vocab_size(), e.vocab_size());
  const auto old_spec = tokenizer::read_model_spec(old_model), new_spec = tokenizer::read_model_spec(ext);
  float lowest = 0;
  for (int32_t id = 0; id < e.old_vocab; ++id) {
    EXPECT_EQ(new_spec.pieces[id].piece, old_spec.pieces[id].piece);
    EXPECT_EQ(new_spec.pieces[id].score, old_spec.pieces[id].score);
    EXPECT_EQ(new_tok.decode({id}), old_tok.decode({id})) << id;
    lowest = std::min(lowest, old_spec.pieces[id].score);
  }
  const auto m = mergeable(new_spec);
  for (const auto& p : e.pieces) {
    EXPECT_EQ(new_tok.piece(p.id), p.piece);
    EXPECT_LT(new_spec.pieces[p.id].score, lowest) << p.piece << ": new pieces score below every old one";
    EXPECT_EQ(tokenizer::bpe_segment(p.piece, m), std::vector<std::string>{p.piece}) << p.piece;
    if (p.piece.rfind(kWordStart, 0) == 0) {  // typed alone, a word-start piece is one id (SentencePiece itself)
      EXPECT_EQ(new_tok.encode(surface(p.piece)), std::vector<int32_t>{p.id}) << p.piece;
      EXPECT_EQ(old_tok.encode(surface(p.piece)), p.from) << p.piece << ": the old pieces it came from";
    }
  }
  // English text the new pieces do not touch encodes as before; Korean takes fewer pieces
  const std::string en = slurp(data_file("tiny_en_val.txt")), ko = slurp(data_file("tiny_ko.txt"));
  EXPECT_EQ(new_tok.encode(en), old_tok.encode(en));
  EXPECT_LT(new_tok.encode(ko).size() * 10, old_tok.encode(ko).size() * 8);
  std::istringstream ko_lines(ko);
  for (std::string line; std::getline(ko_lines, line);) EXPECT_EQ(new_tok.decode(new_tok.encode(line)), line);
  // the same request again is current
  EXPECT_FALSE(tokenizer::ensure_extended_tokenizer(old_model, {data_file("tiny_ko.txt")}, {40, {}}, cfg, 1, 3, ext).second);
  EXPECT_EQ(tokenizer::read_extension(ext).pieces.size(), e.pieces.size());
}

TEST(NewPieces, AListOfPiecesIsAppendedWithWhatItNeedsAndBadListsAreRefused) {
  ScratchDir dir("np_list");
  const fs::path old_model = english_model(dir);
  tokenizer::TokenizerConfig cfg;
  std::ofstream(dir / "pieces.txt") << kWordStart << "데비안\n" << kWordStart << "riverbank\n";
  const auto [e, made] = tokenizer::ensure_extended_tokenizer(old_model, {}, {0, dir / "pieces.txt"}, cfg, 1, 3, dir / "l.model");
  tokenizer::Tokenizer tok(dir / "l.model");
  EXPECT_EQ(tok.encode(" 데비안"), std::vector<int32_t>{tok.piece_to_id(kWordStart + "데비안")});
  EXPECT_EQ(tok.encode("riverbank"), std::vector<int32_t>{tok.piece_to_id(kWordStart + "riverbank")});
  EXPECT_GT(e.pieces.size(), 2u) << "the pieces on the way to the listed ones are appended too";
  int listed = 0;
  for (const auto& p : e.pieces) listed += !p.intermediate;
  EXPECT_EQ(listed, 2);

  auto refused = [&](const std::string& list, const std::string& why) {
    std::ofstream(dir / "bad.txt") << list;
    try {
      tokenizer::ensure_extended_tokenizer(old_model, {}, {0, dir / "bad.txt"}, cfg, 1, 3, dir / "bad.model");
      ADD_FAILURE() << "accepted: " << list;
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find(why), std::string::npos) << err.what();
    }
    EXPECT_FALSE(fs::exists(dir / "bad.model"));
  };
  refused(kWordStart + "데비안\n" + kWordStart + "데비안\n", "listed twice");
  refused("the\n" + kWordStart + "the\n", "already in the vocabulary");
  refused(kWordStart + "river bank\n", "a space or tab");
  // more pieces than the text can give, and a unigram model
  try {
    tokenizer::ensure_extended_tokenizer(old_model, {data_file("tiny_ko.txt")}, {100000, {}}, cfg, 1, 3, dir / "many.model");
    ADD_FAILURE() << "100000 pieces from a 1 KB text";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("expected at most"), std::string::npos) << err.what();
  }
  try {
    tokenizer::ensure_extended_tokenizer(english_model(dir, tokenizer::ModelType::kUnigram), {data_file("tiny_ko.txt")},
                                         {10, {}}, cfg, 1, 3, dir / "u.model");
    ADD_FAILURE() << "a unigram model was extended";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("BPE"), std::string::npos) << err.what();
  }
}

// Through the binary: the new rows start from their old pieces' rows, `old` freezing keeps the old rows
// bit-identical while the new rows move, downstream commands read the larger vocabulary.
TEST(NewPieces, FinetuneWithNewPiecesFreezesOldRowsAndInitialisesNewOnes) {
  ScratchDir dir("np_ft");
  const fs::path pre = pretrain(dir);
  // frozen table: the rows stay as initialised, so they can be checked against the hand-computed rule
  auto r = finetune_ko(dir, pre, "init", "--new-pieces 30 --set finetune.freeze_embeddings=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pieces appended"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("new rows: "), std::string::npos) << r.output;
  const auto e = tokenizer::read_extension(dir / "init" / "tokenizer.model");
  ASSERT_GE(e.pieces.size(), 30u);
  EXPECT_TRUE(fs::is_regular_file(dir / "init" / "step_00000005" / "tokenizer.model.json"));
  const auto base = table(pre), init = table(dir / "init");
  ASSERT_EQ(init.size(0), e.vocab_size());
  EXPECT_TRUE(torch::equal(init.narrow(0, 0, e.old_vocab), base));
  for (size_t i : {size_t(0), e.pieces.size() / 2, e.pieces.size() - 1}) {
    const auto& p = e.pieces[i];
    torch::Tensor mean = torch::zeros({base.size(1)});
    for (int32_t id : p.from) mean += base[id];
    mean /= static_cast<double>(p.from.size());
    const auto d = base.mean(0) / base.mean(0).norm();
    mean -= mean.dot(d) * d;  // less its part along the mean row
    EXPECT_TRUE(torch::allclose(init[p.id], mean, 1e-6, 1e-7)) << p.piece;
  }

  // old: the old rows bit-identical, the new rows move, the drift report lists them apart
  r = finetune_ko(dir, pre, "old", "--new-pieces 30 --set finetune.freeze_embeddings=old");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("frozen rows unchanged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tok_emb.weight added rows"), std::string::npos) << r.output;
  const auto old = table(dir / "old");
  EXPECT_TRUE(torch::equal(old.narrow(0, 0, e.old_vocab), base));
  EXPECT_FALSE(torch::equal(old.narrow(0, e.old_vocab, old.size(0) - e.old_vocab),
                            init.narrow(0, e.old_vocab, init.size(0) - e.old_vocab)));
  const auto forgetting = nlohmann::json::parse(slurp(dir / "old" / "forgetting.json"));
  EXPECT_TRUE(forgetting["new"]["after"].get<double>() < forgetting["new"]["before"].get<double>()) << forgetting;

  // normal init draws N(0, 0.02); mean init gives every new row the same start
  r = finetune_ko(dir, pre, "normal", "--new-pieces 30 --set finetune.freeze_embeddings=true --set finetune.new_rows_init=normal");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto normal = table(dir / "normal").narrow(0, e.old_vocab, e.vocab_size() - e.old_vocab);
  EXPECT_NEAR(normal.std().item<double>(), 0.02, 0.004);
  EXPECT_FALSE(torch::allclose(normal, init.narrow(0, e.old_vocab, e.vocab_size() - e.old_vocab)));
  r = finetune_ko(dir, pre, "mean", "--new-pieces 30 --set finetune.freeze_embeddings=true --set finetune.new_rows_init=mean");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto mean = table(dir / "mean");
  EXPECT_TRUE(torch::allclose(mean[e.old_vocab], base.mean(0), 1e-6, 1e-7));
  EXPECT_TRUE(torch::equal(mean[e.old_vocab], mean[e.vocab_size() - 1]));

  // downstream: sample, inspect drift, report, tokenizer stats
  r = run_lmtrain("sample --checkpoint " + (dir / "old").string() + " --prompt '오늘은 날씨가' --generate 4 --seed 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lmtrain("inspect drift --from " + pre.string() + " --to " + (dir / "old").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tok_emb.weight added rows"), std::string::npos) << r.output;
  r = run_lmtrain("report " + (dir / "old").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(slurp(dir / "old" / "report.html").find("tok_emb.weight added rows"), std::string::npos);
  r = run_lmtrain("tokenizer stats --corpus " + data_file("tiny_ko.txt").string() + " --model " +
                  (pre / "tokenizer.model").string() + " --model " + (dir / "old" / "tokenizer.model").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("added pieces"), std::string::npos) << r.output;
}

TEST(NewPieces, AnExtendedFinetuneResumesBitwise) {
  ScratchDir dir("np_resume");
  const fs::path pre = pretrain(dir);
  const std::string extra = "--new-pieces 20 --set finetune.freeze_embeddings=old --set finetune.unfreeze_embeddings_after=2 "
                            "--set checkpoint.every=1 --set checkpoint.keep_last=10 ";
  auto straight = finetune_ko(dir, pre, "straight", extra);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("step 2: unfroze the"), std::string::npos) << straight.output;
  const auto base = table(pre);
  const auto at2 = table(dir / "straight" / checkpoint::step_name(2)), at3 = table(dir / "straight" / checkpoint::step_name(3));
  EXPECT_TRUE(torch::equal(at2.narrow(0, 0, base.size(0)), base));
  EXPECT_FALSE(torch::equal(at3.narrow(0, 0, base.size(0)), base));
  // the same fine-tune stopped by SIGTERM after step 2, the unfreeze step itself, then resumed in a new
  // process: it restarts the table's moments before step 3 as the straight run did
  pid_t pid = spawn_lmtrain(finetune_ko_args(dir, pre, "split", extra), dir / "split1.log", hold_at(dir, "step:2"));
  ASSERT_TRUE(held(dir, "step:2")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  auto again = finetune_ko(dir, pre, "split", extra + "--resume auto");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("pieces appended to"), std::string::npos) << "the checkpoint's tokenizer: " << again.output;
  EXPECT_NE(again.output.find("step 2: unfroze the"), std::string::npos) << again.output;
  // the same resume asking for other pieces is refused before anything is written
  auto other = finetune_ko(dir, pre, "split", "--new-pieces 25 --set finetune.freeze_embeddings=old "
                                              "--set finetune.unfreeze_embeddings_after=2 --resume " +
                                              (dir / "split" / checkpoint::step_name(3)).string());
  EXPECT_EQ(other.exit_code, 4) << other.output;
  EXPECT_NE(other.output.find("not the extension this config asks for"), std::string::npos) << other.output;
  EXPECT_NE(again.output.find("resumed from"), std::string::npos) << again.output;
  const fs::path s5 = dir / "straight" / checkpoint::step_name(5), r5 = dir / "split" / checkpoint::step_name(5);
  EXPECT_EQ(manifest_sha(s5, "model.safetensors"), manifest_sha(r5, "model.safetensors"));
  EXPECT_EQ(manifest_sha(s5, "optimizer.pt"), manifest_sha(r5, "optimizer.pt"));
}

TEST(NewPieces, RefusalsExitTwoWithAHint) {
  ScratchDir dir("np_refuse");
  const fs::path pre = pretrain(dir);
  auto r = finetune_ko(dir, pre, "a", "--new-pieces 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("Hint:"), std::string::npos) << r.output;
  r = finetune_ko(dir, pre, "b", "--new-pieces 100000");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected at most"), std::string::npos) << r.output;
  r = finetune_ko(dir, pre, "c", "--set finetune.freeze_embeddings=old");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected finetune.new_pieces or finetune.new_pieces_from"), std::string::npos) << r.output;
  std::ofstream(dir / "dup.txt") << kWordStart << "하늘\n" << kWordStart << "하늘\n";
  r = finetune_ko(dir, pre, "d", "--set finetune.new_pieces_from=" + (dir / "dup.txt").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("listed twice"), std::string::npos) << r.output;
  // a checkpoint without its tokenizer model
  fs::copy(pre / checkpoint::step_name(4), dir / "bare", fs::copy_options::recursive);
  fs::remove(dir / "bare" / "tokenizer.model");
  r = finetune_ko(dir, dir / "bare", "e", "--new-pieces 10");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("tokenizer model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Hint:"), std::string::npos) << r.output;
  // the example config reads
  r = run_lmtrain("train -c " + std::string(LMTRAIN_SOURCE_DIR) + "/configs/finetune-faq-ko-new-pieces.yaml --dump-config");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("freeze_embeddings: old"), std::string::npos) << r.output;
}

}  // namespace lm::test
