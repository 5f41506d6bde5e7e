// Token files: header, 16/32-bit ids, mmap read-back, corrupt files rejected; corpus preparation.
#include <gtest/gtest.h>

#include <fstream>

#include "data/batcher.h"
#include "data/prepare.h"
#include "data/token_file.h"
#include "model/gpt.h"
#include "train/evaluate.h"
#include "test_util.h"
#include "util/errors.h"

namespace lm::test {

TEST(TokenFile, WriteThenReadBack16Bit) {
  ScratchDir dir("tf16");
  std::vector<int32_t> ids = {0, 1, 2, 65534, 7, 42};
  data::write_token_file(dir / "a.bin", ids, 65535, std::string(64, 'a'), std::string(64, 'b'));
  data::TokenFile f(dir / "a.bin");
  EXPECT_EQ(f.info().id_bytes, 2u);
  EXPECT_EQ(f.size(), ids.size());
  EXPECT_EQ(f.info().tokenizer_sha256, std::string(64, 'a'));
  EXPECT_EQ(f.info().source_sha256, std::string(64, 'b'));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(f.at(i), ids[i]);
  EXPECT_EQ(fs::file_size(dir / "a.bin"), data::kTokenHeaderBytes + 2 * ids.size());
}

TEST(TokenFile, WideVocabUses32BitIds) {
  ScratchDir dir("tf32");
  std::vector<int32_t> ids = {70000, 3, 99999};
  data::write_token_file(dir / "b.bin", ids, 100000, std::string(64, 'c'), std::string(64, 'd'));
  data::TokenFile f(dir / "b.bin");
  EXPECT_EQ(f.info().id_bytes, 4u);
  std::vector<int64_t> out(3);
  f.copy(0, 3, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{70000, 3, 99999}));
}

TEST(TokenFile, RejectsOutOfRangeIdsAndCorruptFiles) {
  ScratchDir dir("tfbad");
  EXPECT_THROW(data::write_token_file(dir / "c.bin", {5, 200}, 100, "", ""), DataError);
  EXPECT_FALSE(fs::exists(dir / "c.bin"));
  { std::ofstream(dir / "junk.bin") << "not a token file at all"; }
  EXPECT_THROW(data::TokenFile(dir / "junk.bin"), DataError);
  data::write_token_file(dir / "ok.bin", {1, 2, 3}, 10, std::string(64, 'e'), std::string(64, 'f'));
  fs::resize_file(dir / "ok.bin", fs::file_size(dir / "ok.bin") - 1);
  EXPECT_THROW(data::TokenFile(dir / "ok.bin"), DataError);
}

TEST(Prepare, EncodesLinesWithEndOfLineIdsAndDetectsStaleness) {
  ScratchDir dir("prep");
  tokenizer::Tokenizer tok(english_tokenizer_path());
  auto info = data::prepare_corpus({data_file("tiny_en_val.txt")}, tok, dir / "val.bin");
  data::TokenFile f(dir / "val.bin");
  int64_t eos = 0;
  for (uint64_t i = 0; i < f.size(); ++i) eos += f.at(i) == tok.eos_id();
  EXPECT_EQ(eos, 8);  // one per line
  EXPECT_EQ(f.at(f.size() - 1), tok.eos_id());
  EXPECT_EQ(info.tokenizer_sha256, tok.sha256());
  EXPECT_TRUE(data::token_file_is_current({data_file("tiny_en_val.txt")}, tok, dir / "val.bin"));
  EXPECT_FALSE(data::token_file_is_current({data_file("tiny_en.txt")}, tok, dir / "val.bin"));
  EXPECT_THROW(data::prepare_corpus({dir / "missing.txt"}, tok, dir / "x.bin"), DataError);
}

data::PrepareOptions with_threads(int n) {  // in blocks of 64 bytes: many more blocks than threads
  data::PrepareOptions o;
  o.threads = n;
  o.block_bytes = 64;
  return o;
}

// Parts encoded on several threads give the file one thread gives, byte for byte, for any split (more parts
// than lines included); blank lines, CRLF and a last line without a newline included.
TEST(Prepare, AnyThreadCountWritesTheSameFile) {
  ScratchDir dir("prep_threads");
  tokenizer::Tokenizer tok(english_tokenizer_path());
  std::string text = slurp(data_file("tiny_en.txt"));
  text += "\n\n  \r\nA line in CRLF.\r\nthe last line, no newline";
  std::ofstream(dir / "corpus.txt") << text;
  data::prepare_corpus({dir / "corpus.txt"}, tok, dir / "one.bin", with_threads(1));
  const std::string one = slurp(dir / "one.bin");
  ASSERT_GT(one.size(), 1000u);
  for (int threads : {2, 3, 7, 5000}) {
    data::prepare_corpus({dir / "corpus.txt"}, tok, dir / "many.bin", with_threads(threads));
    EXPECT_EQ(slurp(dir / "many.bin"), one) << threads << " threads";
  }
}

// Bits per byte is total nats / ln 2 / bytes: with every id worth one byte it is the loss over ln 2, with
// every id worth two bytes half of that; the loss itself does not depend on the byte table.
TEST(Evaluate, BitsPerByteDividesTheNatsByTheBytes) {
  ScratchDir dir("bpb");
  tokenizer::Tokenizer tok(english_tokenizer_path());
  data::prepare_corpus({data_file("tiny_en.txt")}, tok, dir / "val.bin");
  data::TokenFile file(dir / "val.bin");
  torch::manual_seed(5);
  model::Gpt m(tiny_config(128));
  const auto plain = train::evaluate(*m, file, 4, 0);
  const auto ones = train::evaluate(*m, file, 4, 0, nullptr, nullptr, torch::ones({128}, torch::kInt64));
  const auto twos = train::evaluate(*m, file, 4, 0, nullptr, nullptr, torch::full({128}, 2, torch::kInt64));
  EXPECT_TRUE(std::isnan(plain.bits_per_byte));
  EXPECT_EQ(plain.loss, ones.loss);
  EXPECT_NEAR(ones.bits_per_byte, ones.loss / std::log(2.0), 1e-9);
  EXPECT_NEAR(twos.bits_per_byte, ones.bits_per_byte / 2, 1e-9);
  const auto real = train::evaluate(*m, file, 4, 0, nullptr, nullptr,
                                    torch::tensor(tokenizer::decoded_bytes_per_id(tok), torch::kInt64));
  EXPECT_GT(real.bits_per_byte, 0.0);
  EXPECT_LT(real.bits_per_byte, real.loss / std::log(2.0));  // English pieces average more than one byte
}

TEST(Batcher, SameIndexSameBatchAndTargetsShiftByOne) {
  ScratchDir dir("batch");
  std::vector<int32_t> ids(500);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 97);
  data::write_token_file(dir / "d.bin", ids, 97, std::string(64, '0'), std::string(64, '0'));
  data::TokenFile f(dir / "d.bin");
  data::Batcher a(f, 4, 8, 123), b(f, 4, 8, 123);
  auto b0 = a.next();
  auto b1 = a.next();
  EXPECT_EQ(b0.x.sizes(), (torch::IntArrayRef{4, 8}));
  EXPECT_TRUE(torch::equal(b0.x.narrow(1, 1, 7), b0.y.narrow(1, 0, 7)));
  EXPECT_FALSE(torch::equal(b0.x, b1.x));
  EXPECT_TRUE(torch::equal(b.at(1).x, b1.x));
  EXPECT_EQ(a.cursor(), 2u);
  EXPECT_THROW(data::Batcher(f, 4, 600, 1), DataError);
}

}  // namespace lm::test
