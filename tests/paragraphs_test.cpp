// data::join_paragraphs on small hand-made texts (tests/corpus_join_test.py runs it on the real Debian FAQs
// through `lmtrain corpus get`), and `corpus get`'s refusals.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/corpus.h"
#include "data/paragraphs.h"
#include "data/token_file.h"
#include "test_util.h"
#include "tokenizer/model_spec.h"
#include "util/errors.h"
#include "util/fs.h"

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

// The hard-wrap check fires on real wrapped texts (the GPL, which every Debian system has; a man page and the
// Korean FAQ's .txt where installed) and stays quiet on a verse per line (the KJV, where installed; the tests'
// own text) and on a paragraph per line (the joined FAQ).
TEST(Paragraphs, HardWrapEvidenceFiresOnWrappedTextOnly) {
  using test::run_command;
  const std::string gpl = util::read_file("/usr/share/common-licenses/GPL-3", "GPL-3");
  EXPECT_NE(data::hard_wrap_evidence(gpl), "") << "the GPL is wrapped at ~75 characters";
  EXPECT_EQ(data::hard_wrap_evidence(data::join_paragraphs(gpl)), "");
  EXPECT_EQ(data::hard_wrap_evidence(util::read_file(test::data_file("tiny_en.txt"), "tiny_en")), "");
  const auto man = run_command("MANWIDTH=80 man -P cat ls 2>/dev/null");
  if (man.exit_code == 0 && man.output.size() > 2000) {
    EXPECT_NE(data::hard_wrap_evidence(man.output), "") << "man ls";
  }
  const auto kjv = run_command("bible -f gen1:1-exo40:38 2>/dev/null | sed -E 's/^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ //'");
  if (kjv.exit_code == 0 && kjv.output.size() > 10000) {
    EXPECT_EQ(data::hard_wrap_evidence(kjv.output), "") << "KJV";
  }
  for (const std::string lang : {"en", "ko"}) {
    const auto faq = run_command("zcat /usr/share/doc/debian/FAQ/debian-faq." + lang + ".txt.gz 2>/dev/null");
    if (faq.exit_code != 0) continue;
    EXPECT_NE(data::hard_wrap_evidence(faq.output), "") << "the " << lang << " FAQ as packaged";
    EXPECT_EQ(data::hard_wrap_evidence(data::join_paragraphs(faq.output)), "") << "the " << lang << " FAQ joined";
  }
}

// data.unit paragraph: a wrapped text trains exactly as its joined form read a line per unit (the same tokenizer
// and token files, byte for byte); a change of unit makes the tokenizer and token data stale; data.unit line
// on the wrapped text warns, naming the key.
TEST(DataUnit, ParagraphReadsAWrappedTextAsItsJoinedForm) {
  test::ScratchDir dir("data_unit");
  const std::string gpl = util::read_file("/usr/share/common-licenses/GPL-3", "GPL-3");
  std::ofstream(dir / "wrapped.txt") << gpl;
  std::ofstream(dir / "joined.txt") << data::join_paragraphs(gpl);
  auto config = [&](const std::string& name, const std::string& text, const std::string& unit) {
    const std::filesystem::path cfg = dir / (name + ".yaml");
    std::ofstream(cfg) << "run: {dir: " << (dir / name).string() << ", seed: 3, threads: 1, blas_threads: 1, precision: fp32}\n"
                       << "data: {train: " << (dir / text).string() << ", val: " << (dir / text).string() << ", unit: " << unit << "}\n"
                       << "tokenizer: {vocab_size: 300}\nmodel: {d_model: 32, n_layers: 1, n_heads: 2, max_seq_len: 32}\n"
                       << "train: {batch_size: 4, max_steps: 2, warmup_steps: 1, eval_every: 0, eval_batches: 2}\n";
    return cfg.string();
  };
  auto a = test::run_lmtrain("train -c " + config("para", "wrapped.txt", "paragraph"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("paragraphs (") , std::string::npos) << a.output;
  EXPECT_EQ(a.output.find("looks hard-wrapped"), std::string::npos) << a.output;
  auto b = test::run_lmtrain("train -c " + config("line", "joined.txt", "line"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(b.output.find("looks hard-wrapped"), std::string::npos) << b.output;
  // the same pieces and the same ids (the files differ only where they name their inputs)
  const auto tokens = [&](const std::string& run, const char* file) {
    const data::TokenFile t(dir / run / file);
    std::vector<int64_t> ids(t.size());
    t.copy(0, t.size(), ids.data());
    return ids;
  };
  const auto pieces = [&](const std::string& run) {
    std::vector<std::string> out;
    for (const auto& p : tokenizer::read_model_spec(dir / run / "tokenizer.model").pieces) out.push_back(p.piece);
    return out;
  };
  EXPECT_EQ(pieces("para"), pieces("line"));
  for (const char* f : {"train.bin", "val.bin"}) EXPECT_EQ(tokens("para", f), tokens("line", f)) << f << " differs";
  // the same run directory with data.unit line: stale, so the tokenizer is trained anew; and a warning
  auto c = test::run_lmtrain("train -c " + config("para", "wrapped.txt", "line") + " --overwrite");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(c.output.find("is current"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("tokenizer: trained"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("looks hard-wrapped"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("Hint: set data.unit: paragraph"), std::string::npos) << c.output;
  EXPECT_NE(tokens("para", "train.bin"), tokens("line", "train.bin"));
  // and back to paragraph: the earlier data again
  auto d = test::run_lmtrain("train -c " + config("para", "wrapped.txt", "paragraph") + " --overwrite");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(tokens("para", "train.bin"), tokens("line", "train.bin"));
  // a fine-tune's forgetting report reads the original validation text joined, as the original run did
  std::ofstream(dir / "ft.yaml") << "run: {dir: " << (dir / "ft").string() << ", seed: 3, threads: 1, blas_threads: 1}\n"
                                 << "data: {train: " << (dir / "joined.txt").string() << ", val: " << (dir / "joined.txt").string()
                                 << "}\ntrain: {batch_size: 4, max_steps: 2, warmup_steps: 1, eval_every: 0, eval_batches: 2}\n";
  auto ft = test::run_lmtrain("finetune --from " + (dir / "para").string() + " -c " + (dir / "ft.yaml").string());
  ASSERT_EQ(ft.exit_code, 0) << ft.output;
  EXPECT_EQ(test::slurp(dir / "ft" / "original_val-0.txt"), data::join_paragraphs(gpl));
  EXPECT_TRUE(std::filesystem::exists(dir / "ft" / "forgetting.json"));
}

}  // namespace
}  // namespace lm
