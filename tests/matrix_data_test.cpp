// The matrix's corpus, tokenizer, config and token-file cases (tests/matrix.h).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstring>

#include "matrix.h"
#include "matrix_expect.h"

namespace lm::test::matrix {

namespace {

// `tokenizer train` on dir/name holding `text`; what must stay intact: no model file appears.
Case corpus_case(std::string name, std::string input, std::string text, const char* pattern) {
  Case c{name, input, pattern, 3, "no tokenizer model is written", nullptr, nullptr};
  c.act = [name, text](Ctx& ctx) {
    const fs::path corpus = ctx.write(name + ".txt", text);
    return ctx.lm("tokenizer train --input " + corpus.string() + " --model " + (ctx / "out.model").string() +
                  " --vocab-size 64");
  };
  c.check = [](Ctx& ctx, const RunResult&) { EXPECT_FALSE(fs::exists(ctx / "out.model")); };
  return c;
}

// `prepare` of dir/name holding `text` over an existing good token file, which must stay byte for byte.
Case prepare_case(std::string name, std::string input, std::string text, const char* pattern) {
  Case c{name, input, pattern, 3, "the existing out.bin is not touched", nullptr, nullptr};
  c.act = [name, text](Ctx& ctx) {
    const fs::path corpus = ctx.write(name + ".txt", text);
    fs::copy_file(Ctx::base_run() / "val.bin", ctx / "out.bin");
    return ctx.lm("prepare --tokenizer " + (Ctx::base_run() / "tokenizer.model").string() + " --input " +
                  corpus.string() + " --output " + (ctx / "out.bin").string());
  };
  c.check = [](Ctx& ctx, const RunResult&) { EXPECT_EQ(slurp(ctx / "out.bin"), slurp(Ctx::base_run() / "val.bin")); };
  return c;
}

// `train --dry-run` with a YAML file holding `yaml` (data paths filled in); nothing may be written.
Case config_case(std::string name, std::string input, std::string yaml, const char* pattern,
                 std::string extra_args = "") {
  Case c{name, input, pattern, 2, "no run directory is created", nullptr, nullptr};
  c.act = [name, yaml, extra_args](Ctx& ctx) {
    std::string text = yaml;
    for (size_t at; (at = text.find("@RUN@")) != std::string::npos;) text.replace(at, 5, (ctx / "run").string());
    for (size_t at; (at = text.find("@DATA@")) != std::string::npos;) text.replace(at, 6, LMTRAIN_TEST_DATA_DIR);
    return ctx.lm("train -c " + ctx.write(name + ".yaml", text).string() + " --dry-run " + extra_args);
  };
  c.check = [](Ctx& ctx, const RunResult&) { EXPECT_FALSE(fs::exists(ctx / "run")); };
  return c;
}

const std::string kGoodYaml =
    "run: {dir: @RUN@, seed: 3}\n"
    "data: {train: @DATA@/tiny_en.txt, val: @DATA@/tiny_en_val.txt}\n"
    "tokenizer: {vocab_size: 128}\n"
    "model: {d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 16}\n";

// `inspect drift --tokens` over a copy of the run's train.bin changed by `edit`; the copy and the two
// checkpoints must be unchanged afterwards.
Case token_case(std::string name, std::string input, std::function<void(std::string&)> edit, const char* pattern) {
  Case c{name, input, pattern, 3, "the token file and both checkpoints are unchanged", nullptr, nullptr};
  c.act = [edit](Ctx& ctx) {
    std::string bytes = slurp(Ctx::base_run() / "train.bin");
    edit(bytes);
    const fs::path bin = ctx.write("edited.bin", bytes);
    return ctx.lm("inspect drift --from " + (Ctx::base_run() / "step_00000002").string() + " --to " +
                  (Ctx::base_run() / "step_00000004").string() + " --tokens " + bin.string());
  };
  c.check = [edit](Ctx& ctx, const RunResult&) {
    std::string bytes = slurp(Ctx::base_run() / "train.bin");
    edit(bytes);
    EXPECT_EQ(slurp(ctx / "edited.bin"), bytes);
    EXPECT_EQ(ctx.lm("ckpt verify " + (Ctx::base_run() / "step_00000004").string()).exit_code, 0);
  };
  return c;
}

template <typename T>
void put(std::string& b, size_t off, T v) {
  std::memcpy(&b[off], &v, sizeof v);
}

}  // namespace

std::vector<Case> corpus_cases() {
  std::vector<Case> out = {
      corpus_case("corpus_empty", "empty corpus file", "", expect::kCorpusEmpty),
      corpus_case("corpus_whitespace_only", "corpus of spaces, tabs and blank lines", "  \n\t\n \r\n\n",
                  expect::kCorpusBlank),
      corpus_case("corpus_invalid_utf8", "byte 0xFF in line 2 (Latin-1 or binary text)", "good line\nhello \xff world\n",
                  expect::kCorpusBadUtf8),
      corpus_case("corpus_overlong_utf8", "overlong encoding C0 AF of '/'", "ab\xc0\xaf\n", expect::kCorpusOverlong),
      corpus_case("corpus_surrogate_utf8", "UTF-16 surrogate encoded as UTF-8 (ED A0 80)", "\xed\xa0\x80 x\n",
                  expect::kCorpusSurrogate),
      prepare_case("corpus_truncated_multibyte", "file ends inside a 3-byte sequence (E4 B8)", "abc\nab \xe4\xb8",
                   expect::kCorpusCutOff),
      prepare_case("corpus_nul_byte", "NUL byte in line 3", std::string("one\ntwo\nab\0cd\n", 14), expect::kCorpusNul),
      prepare_case("corpus_10mb_line", "a 10 MB single line after a normal one",
                   "first line\n" + std::string(10 << 20, 'a') + "\n", expect::kCorpusLongLine),
      corpus_case("vocab_too_large", "vocab_size 100000 on a 4.6 KB corpus", "", expect::kVocabTooLarge),
      corpus_case("vocab_below_characters", "vocab_size 8, fewer than the corpus's characters", "", expect::kVocabBelowChars),
  };
  // The last two train on the team corpus with another size.
  out[8].act = [](Ctx& ctx) {
    return ctx.lm("tokenizer train --input " + data_file("tiny_en.txt").string() + " --model " +
                  (ctx / "out.model").string() + " --vocab-size 100000");
  };
  out[9].act = [](Ctx& ctx) {
    return ctx.lm("tokenizer train --input " + data_file("tiny_en.txt").string() + " --model " +
                  (ctx / "out.model").string() + " --vocab-size 8");
  };
  auto model_case = [](std::string name, std::string input, std::function<std::string()> bytes, const char* pattern) {
    Case c{name, input, pattern, 3, "the model file is left as it was", nullptr, nullptr};
    c.act = [bytes](Ctx& ctx) {
      return ctx.lm("tokenizer encode --model " + ctx.write("bad.model", bytes()).string() + " --text hello");
    };
    c.check = [bytes](Ctx& ctx, const RunResult&) { EXPECT_EQ(slurp(ctx / "bad.model"), bytes()); };
    return c;
  };
  out.push_back(model_case("tokenizer_model_random", "4 KB of random bytes as tokenizer.model", [] {
    std::string b(4096, '\0');
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>((i * 2654435761u) >> 13);
    return b;
  }, expect::kTokenizerModelBad));
  out.push_back(model_case("tokenizer_model_truncated", "the run's tokenizer.model cut to half", [] {
    const std::string m = slurp(Ctx::base_run() / "tokenizer.model");
    return m.substr(0, m.size() / 2);
  }, expect::kTokenizerModelBad));
  out.push_back(model_case("tokenizer_model_empty", "0-byte tokenizer.model", [] { return std::string(); },
                           expect::kTokenizerModelEmpty));
  auto special = [](std::string name, std::string input, const char* pattern, std::function<fs::path(Ctx&)> make) {
    Case c{name, input, pattern, 3, "no tokenizer model is written", nullptr, nullptr};
    c.act = [make](Ctx& ctx) {
      return ctx.lm("tokenizer train --input " + make(ctx).string() + " --model " + (ctx / "w" / "out.model").string() +
                    " --vocab-size 64");
    };
    c.check = [](Ctx& ctx, const RunResult&) { EXPECT_FALSE(fs::exists(ctx / "w" / "out.model")); };
    return c;
  };
  out.push_back(special("corpus_directory", "a directory with no files as the corpus (only hidden ones)",
                        expect::kCorpusDirectory, [](Ctx& ctx) {
                          fs::create_directories(ctx / "empty" / ".git");
                          std::ofstream(ctx / "empty" / ".notes.txt") << "hidden\n";
                          return ctx / "empty";
                        }));
  out.push_back(special("corpus_fifo", "a FIFO as the corpus (nothing ever writes to it)", expect::kCorpusFifo, [](Ctx& ctx) {
    ::mkfifo((ctx / "fifo").c_str(), 0644);
    return ctx / "fifo";
  }));
  out.push_back(special("corpus_missing", "a corpus path that does not exist", expect::kCorpusMissing,
                        [](Ctx& ctx) { return ctx / "nope.txt"; }));
  Case unreadable{"corpus_unreadable", "a corpus without read permission (mode 000; root's override dropped)",
                  expect::kCorpusUnreadable, 3, "no tokenizer model is written", nullptr, nullptr};
  unreadable.act = [](Ctx& ctx) {
    const fs::path corpus = ctx.write("secret.txt", "some text\n");
    fs::permissions(corpus, fs::perms::none);
    fs::create_directories(ctx / "w");
    fs::permissions(ctx / "w", fs::perms::all);
    return run_command(as_unprivileged() + LMTRAIN_BINARY + " tokenizer train --input " + corpus.string() +
                       " --model " + (ctx / "w" / "out.model").string() + " --vocab-size 64");
  };
  unreadable.check = [](Ctx& ctx, const RunResult&) { EXPECT_FALSE(fs::exists(ctx / "w" / "out.model")); };
  out.push_back(unreadable);
  Case shut{"corpus_dir_shut", "a readable corpus inside a directory its user may not search (mode 0600; root's override "
            "dropped)", expect::kCorpusDirShut, 3, "no tokenizer model is written", nullptr, nullptr};
  shut.act = [](Ctx& ctx) {
    const fs::path corpus = ctx.write("shut/t.txt", "some text\n");
    fs::permissions(ctx / "shut", fs::perms::owner_read | fs::perms::owner_write);
    fs::create_directories(ctx / "w");
    fs::permissions(ctx / "w", fs::perms::all);
    return run_command(as_unprivileged() + LMTRAIN_BINARY + " tokenizer train --input " + corpus.string() +
                       " --model " + (ctx / "w" / "out.model").string() + " --vocab-size 64");
  };
  shut.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_FALSE(fs::exists(ctx / "w" / "out.model"));
    fs::permissions(ctx / "shut", fs::perms::owner_all);  // so that the scratch directory can be removed
  };
  out.push_back(shut);
  Case train_empty{"train_corpus_empty", "`train` whose data.train is an empty file", expect::kCorpusEmpty, 3,
                   "no checkpoint, tokenizer or token file is written", nullptr, nullptr};
  train_empty.act = [](Ctx& ctx) {
    ctx.write("empty.txt", "");
    return ctx.lm("train -c " + ctx.config().string() + " --set data.train=" + (ctx / "empty.txt").string());
  };
  train_empty.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_FALSE(fs::exists(ctx / "run" / "tokenizer.model"));
    EXPECT_FALSE(fs::exists(ctx / "run" / "train.bin"));
    EXPECT_FALSE(fs::exists(ctx / "run" / "latest"));
  };
  out.push_back(train_empty);
  return out;
}

std::vector<Case> config_cases() {
  const std::string train = "train: {batch_size: 4, max_steps: 4, warmup_steps: 1}\n";
  std::vector<Case> out = {
      config_case("config_unknown_key", "unknown key train.batchsize", kGoodYaml + "train: {batchsize: 4}\n",
                  expect::kUnknownKey),
      config_case("config_unknown_section", "unknown section 'trian'", kGoodYaml + "trian: {lr: 0.1}\n",
                  expect::kUnknownSection),
      config_case("config_wrong_type", "batch_size: four", kGoodYaml + "train: {batch_size: four}\n", expect::kWrongType),
      config_case("config_fractional_int", "batch_size: 2.5", kGoodYaml + "train: {batch_size: 2.5}\n",
                  expect::kFractionalInt),
      config_case("config_zero_size", "--set model.d_model=0", kGoodYaml + train, expect::kZeroSize,
                  "--set model.d_model=0"),
      config_case("config_negative_size", "max_steps: -5", kGoodYaml + "train: {max_steps: -5}\n",
                  expect::kNegativeSize),
      config_case("yaml_tab_indent", "a tab indents a key", "run: {dir: @RUN@}\ntrain:\n\tlr: 0.1\n", expect::kYamlTab),
      config_case("yaml_unclosed_quote", "an unclosed quote", "run: {dir: \"@RUN@}\n", expect::kYamlQuote),
      config_case("yaml_bad_indent", "a key indented deeper than its sibling", "run:\n  dir: @RUN@\n   seed: 3\n",
                  expect::kYamlIndent),
      config_case("yaml_deep_nesting", "100000 nested flow lists (no stack overflow)",
                  std::string(100000, '[') + std::string(100000, ']') + "\n", expect::kYamlDeep),
      config_case("yaml_deep_block_maps", "3000 nested block maps", [] {
        std::string y;
        for (int i = 0; i < 3000; ++i) y += std::string(static_cast<size_t>(i), ' ') + "a:\n";
        return y + std::string(3000, ' ') + "b\n";
      }(), expect::kYamlDeep),
      config_case("config_empty_file", "an empty config file", "", expect::kConfigEmpty),
      config_case("config_not_a_map", "a config that is a list", "- run\n- train\n", expect::kConfigNotMap),
      config_case("config_duplicate_key", "train.lr given twice in one section",
                  kGoodYaml + "train: {lr: 0.1, lr: 0.2}\n", expect::kDuplicateKey),
      config_case("config_duplicate_section", "section train given twice (last-wins would hide the first)",
                  kGoodYaml + "train: {lr: 0.1}\ntrain: {lr: 0.2}\n", expect::kDuplicateSection),
      config_case("set_unknown_key", "--set train.lrr=1", kGoodYaml, expect::kSetUnknown, "--set train.lrr=1"),
      config_case("set_without_equals", "--set train.lr (no value)", kGoodYaml, expect::kSetNoEquals, "--set train.lr"),
      config_case("lr_1e6", "--set train.lr=1e6", kGoodYaml, expect::kLrHuge, "--set train.lr=1e6"),
      [] {
        Case c{"config_directory", "a directory as the config file", expect::kConfigDirectory, 2,
               "nothing is written", nullptr, nullptr};
        c.act = [](Ctx& ctx) { return ctx.lm("train -c " + ctx.dir().path().string() + " --dry-run"); };
        c.check = [](Ctx& ctx, const RunResult&) { EXPECT_TRUE(fs::is_empty(ctx.dir().path())); };
        return c;
      }(),
  };
  Case shut{"config_dir_shut", "a config file inside a directory its user may not search (mode 0600; root's override "
            "dropped)", expect::kConfigShut, 2, "no run directory is created", nullptr, nullptr};
  shut.act = [](Ctx& ctx) {
    const fs::path cfg = ctx.write("shut/c.yaml", "run: {dir: " + (ctx / "run").string() + "}\n");
    fs::permissions(ctx / "shut", fs::perms::owner_read | fs::perms::owner_write);
    return run_command(as_unprivileged() + LMTRAIN_BINARY + " train -c " + cfg.string());
  };
  shut.check = [](Ctx& ctx, const RunResult&) {
    fs::permissions(ctx / "shut", fs::perms::owner_all);
    EXPECT_FALSE(fs::exists(ctx / "run"));
  };
  out.push_back(shut);
  return out;
}

std::vector<Case> token_file_cases() {
  std::vector<Case> out = {
      token_case("token_wrong_magic", "token file whose magic is LMTOKENZ", [](std::string& b) { b[7] = 'Z'; },
                 expect::kTokenMagic),
      token_case("token_future_version", "token file of format version 9", [](std::string& b) { put<uint32_t>(b, 8, 9); },
                 expect::kTokenFuture),
      token_case("token_truncated", "token file missing its last 3 bytes",
                 [](std::string& b) { b.resize(b.size() - 3); }, expect::kTokenTruncated),
      token_case("token_count_disagrees", "header count 2^64-1 (a byte count that would wrap)",
                 [](std::string& b) { put<uint64_t>(b, 16, ~uint64_t{0}); }, expect::kTokenCount),
      token_case("token_id_out_of_range", "id 200 at position 5 with vocab 128",
                 [](std::string& b) { put<uint16_t>(b, 256 + 2 * 5, 200); }, expect::kTokenIdRange),
      token_case("token_width_mismatch", "4-byte id width declared for a 128-piece vocabulary",
                 [](std::string& b) { put<uint32_t>(b, 12, 4); }, expect::kTokenWidth),
      token_case("token_other_tokenizer", "token file made with another tokenizer (its hash)",
                 [](std::string& b) { b[32] = b[32] == 'a' ? 'b' : 'a'; }, expect::kTokenOtherTokenizer),
  };
  Case reencode{"token_file_in_run_corrupt", "`train --resume auto` whose RUN/train.bin lost its magic",
                expect::kTokenReencoded, 0, "the run re-encodes train.bin and resumes to the same final weights",
                nullptr, nullptr};
  reencode.act = [](Ctx& ctx) {
    const fs::path run = ctx.copy_run();
    fs::remove_all(run / "step_00000004");
    ctx.write("run/latest", "step_00000002\n");
    flip_bit(run / "train.bin", 0);
    return ctx.lm("train -c " + ctx.config().string() + " --resume auto");
  };
  reencode.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_EQ(manifest_sha(ctx / "run" / "step_00000004", "model.safetensors"), Ctx::base_final_sha());
  };
  out.push_back(reencode);
  return out;
}

}  // namespace lm::test::matrix
