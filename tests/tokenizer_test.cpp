// Tokenizer: training through the isolated bridge, round-trips, and failure without leftovers.
#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"
#include "util/errors.h"

namespace lm::test {

TEST(Tokenizer, RoundTripsEnglishText) {
  tokenizer::Tokenizer tok(english_tokenizer_path());
  EXPECT_EQ(tok.vocab_size(), 128);
  const std::string text = "The baker lights the oven before the sun rises.";
  auto ids = tok.encode(text);
  ASSERT_FALSE(ids.empty());
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 128);
  }
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.sha256().size(), 64u);
  EXPECT_EQ(tok.eos_id(), 2);
}

// The byte table behind bits per byte: a line's ids, with the </s> that ends it, count the bytes the line
// decodes to plus one (its leading word-start mark stands for the newline before it).
TEST(Tokenizer, DecodedBytesPerIdAddUpToTheDecodedText) {
  tokenizer::Tokenizer tok(english_tokenizer_path());
  const auto bytes = tokenizer::decoded_bytes_per_id(tok);
  ASSERT_EQ(bytes.size(), 128u);
  EXPECT_EQ(bytes[static_cast<size_t>(tok.eos_id())], 0);
  EXPECT_EQ(bytes[static_cast<size_t>(tok.unk_id())], 1);
  std::istringstream lines(slurp(data_file("tiny_en_val.txt")));
  std::string line;
  int checked = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    auto ids = tok.encode(line);
    int64_t sum = bytes[static_cast<size_t>(tok.eos_id())];
    for (int32_t id : ids) sum += bytes[static_cast<size_t>(id)];
    EXPECT_EQ(sum, static_cast<int64_t>(tok.decode(ids).size()) + 1) << line;
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST(Tokenizer, RoundTripsKoreanText) {
  ScratchDir dir("ko");
  tokenizer::TokenizerConfig cfg;
  cfg.vocab_size = 180;
  cfg.model_type = tokenizer::ModelType::kUnigram;
  cfg.character_coverage = 1.0;
  fs::path model = dir / "ko.model";
  tokenizer::train_tokenizer({data_file("tiny_ko.txt")}, model, cfg, 1);
  tokenizer::Tokenizer tok(model);
  const std::string text = "오늘은 날씨가 좋아서 공원에 산책을 갔다.";
  auto ids = tok.encode(text);
  ASSERT_FALSE(ids.empty());
  for (int32_t id : ids) EXPECT_NE(id, tok.unk_id());
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(Tokenizer, TooLargeVocabFailsClearlyAndLeavesNoFile) {
  ScratchDir dir("big");
  tokenizer::TokenizerConfig cfg;
  cfg.vocab_size = 100000;
  fs::path model = dir / "big.model";
  try {
    tokenizer::train_tokenizer({data_file("tiny_en.txt")}, model, cfg, 1);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size=100000"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(model));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "temporary SentencePiece files were left behind";
}

// The hint of a vocabulary too large names the largest size the text supports, and that size trains.
TEST(Tokenizer, TooLargeVocabNamesTheLargestThatFits) {
  for (const char* type : {"bpe", "unigram"}) {
    ScratchDir dir(std::string("largest-") + type);
    tokenizer::TokenizerConfig cfg;
    cfg.vocab_size = 5000;
    cfg.model_type = tokenizer::parse_model_type(type);
    std::string why;
    try {
      tokenizer::train_tokenizer({data_file("tiny_en.txt")}, dir / "t.model", cfg, 1);
    } catch (const DataError& e) {
      why = e.what();
    }
    const std::string says = "Hint: set tokenizer.vocab_size to at most ";
    const auto at = why.find(says);
    ASSERT_NE(at, std::string::npos) << type << ": " << why;
    cfg.vocab_size = std::stoi(why.substr(at + says.size()));
    EXPECT_LT(cfg.vocab_size, 5000) << why;
    tokenizer::train_tokenizer({data_file("tiny_en.txt")}, dir / "t.model", cfg, 1);
    EXPECT_EQ(tokenizer::Tokenizer(dir / "t.model").vocab_size(), cfg.vocab_size) << type;
  }
}

TEST(Tokenizer, MissingModelIsADataError) {
  EXPECT_THROW(tokenizer::Tokenizer("/nonexistent/x.model"), DataError);
}

TEST(Tokenizer, EnsureRetrainsOnlyWhenSettingsChange) {
  ScratchDir dir("ensure");
  tokenizer::TokenizerConfig cfg;
  cfg.vocab_size = 100;
  fs::path model = dir / "t.model";
  EXPECT_TRUE(tokenizer::ensure_tokenizer({data_file("tiny_en.txt")}, model, cfg, 1));
  EXPECT_FALSE(tokenizer::ensure_tokenizer({data_file("tiny_en.txt")}, model, cfg, 1));
  cfg.vocab_size = 110;
  EXPECT_TRUE(tokenizer::ensure_tokenizer({data_file("tiny_en.txt")}, model, cfg, 1));
  EXPECT_EQ(tokenizer::Tokenizer(model).vocab_size(), 110);
}

}  // namespace lm::test
