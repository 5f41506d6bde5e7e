// data::join_paragraphs on small hand-made texts (tests/corpus_join_test.py runs it on the real Debian FAQs
// through `lmtrain corpus get`), and `corpus get`'s refusals.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "data/corpus.h"
#include "data/paragraphs.h"
#include "util/errors.h"

namespace lm {
namespace {

TEST(Paragraphs, LatinWrapsBecomeOneSpaceAndBlankLinesSeparate) {
  data::JoinCounts counts;
  const std::string in = "  The first line\twraps\n  here, and\n\n\n ends.  \n\nA\xC2\xA0non-breaking\xE2\x80\xAFspace\n";
  EXPECT_EQ(data::join_paragraphs(in, &counts), "The first line wraps here, and\nends.\nA non-breaking space\n");
  EXPECT_EQ(counts.paragraphs, 3);
  EXPECT_EQ(counts.wraps, 1);
  EXPECT_EQ(counts.without_space, 0);
  EXPECT_EQ(counts.nbsp_lines, 1);
  EXPECT_EQ(data::join_paragraphs(""), "");
  EXPECT_EQ(data::join_paragraphs("\n \n"), "");
  EXPECT_EQ(data::join_paragraphs("no newline at the end"), "no newline at the end\n");
}

TEST(Paragraphs, AnInvalidByteSurvivesUnchanged) {
  EXPECT_EQ(data::join_paragraphs("caf\xE9\nau lait\n"), "caf\xE9 au lait\n");
}

// In a text with Hangul, the words inside lines decide: "습니다." ends words here (seen as an ending, never as a
// start), so a line starting with it continues the word before the wrap; "따라" starts words, so the wrap before
// it keeps its space. A line starting with closing punctuation, and a URL cut after "://", continue the line.
TEST(Paragraphs, HangulWrapsFollowTheTextsOwnWords) {
  const std::string inner = "앞 이것은 좋습니다. 그것도 좋습니다. 조건에 따라 다릅니다. 규칙에 따라 다릅니다. 끝\n\n";
  const std::string in = inner + "설명이 있\n습니다. 그리고 조건에\n따라 다릅니다\n. 주소는 https://\nwww.debian.org 입니다\n";
  data::JoinCounts counts;
  const std::string out = data::join_paragraphs(in, &counts);
  EXPECT_NE(out.find("있습니다."), std::string::npos) << out;
  EXPECT_NE(out.find("조건에 따라"), std::string::npos) << out;
  EXPECT_NE(out.find("다릅니다."), std::string::npos) << out;
  EXPECT_NE(out.find("https://www.debian.org"), std::string::npos) << out;
  EXPECT_EQ(counts.wraps, 4);
  EXPECT_EQ(counts.without_space, 3);
}

TEST(Paragraphs, CorpusGetRefusesAnUnknownName) {
  try {
    data::fetch_corpus("wikipedia", std::filesystem::temp_directory_path() / "lmtrain-corpus-unknown");
    FAIL() << "an unknown corpus was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("kjv, debian-faq, debian-faq-ko"), std::string::npos) << e.what();
  }
  EXPECT_EQ(data::corpus_package("kjv"), "bible-kjv");
  EXPECT_EQ(data::corpus_package("debian-faq-ko"), "debian-faq-ko");
}

}  // namespace
}  // namespace lm
