// `lmtrain tokenizer train|stats|encode|decode` (`prepare` is in cmd_prepare.cpp).
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "config/config.h"
#include "inspect/tokenizer_stats.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/text.h"

namespace lm::cli {
namespace {

std::string text_or_stdin(const std::string& text, const std::string& file) {
  if (!text.empty()) return text;
  if (!file.empty()) return util::read_file(file, "input text");
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> sizes;
  for (const auto& item : util::split(text, ',')) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || used == 0 || v < 8) {
      throw ConfigError("[tokenizer] --sizes: expected comma-separated sizes >= 8, got '" + item + "'");
    }
    sizes.push_back(v);
  }
  if (sizes.empty()) throw ConfigError("[tokenizer] --sizes: expected at least one size, got ''");
  return sizes;
}

void add_train_command(CLI::App* tokcmd) {
  struct TrainOpts {
    std::string input, model, model_type = "bpe", normalization = "nfkc";
    tokenizer::TokenizerConfig cfg;
    int threads = 2;
    uint64_t seed = 1337;
  };
  auto t = std::make_shared<TrainOpts>();
  auto* train = tokcmd->add_subcommand("train", "Train a tokenizer on a UTF-8 text file");
  train->add_option("--input", t->input, "training text: a file, a directory (its files, recursively) or a quoted glob")->required();
  train->add_option("--model", t->model, "output .model file (written only on success)")->required();
  train->add_option("--vocab-size", t->cfg.vocab_size, "vocabulary size")->capture_default_str()->check(CLI::Range(8, 1000000));
  train->add_option("--model-type", t->model_type, "bpe | unigram")->capture_default_str();
  train->add_option("--character-coverage", t->cfg.character_coverage, "fraction of characters covered")
      ->capture_default_str()->check(CLI::Range(0.5, 1.0));
  train->add_option("--max-sentences", t->cfg.max_sentences, "lines sampled (0 = auto: all up to 100 MB of text, 1000000 above)")->capture_default_str();
  train->add_option("--seed", t->seed, "seed of the sample of lines")->capture_default_str();
  train->add_option("--byte-fallback", t->cfg.byte_fallback, "true: 256 byte pieces, no character is <unk>")->capture_default_str();
  train->add_option("--normalization", t->normalization, "nfkc | identity (the text as it is, as llama.cpp)")->capture_default_str();
  train->add_option("--threads", t->threads, "trainer threads")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  train->callback([t] {
    t->cfg.model_type = tokenizer::parse_model_type(t->model_type);
    t->cfg.normalization = tokenizer::parse_normalization(t->normalization);
    try {
      tokenizer::train_tokenizer(tokenizer::list_corpus_files(t->input, "training corpus"), t->model, t->cfg, t->threads,
                                 t->seed);
    } catch (const DataError& e) {  // the hint names the config keys; here the user set flags
      std::string why = e.what();
      for (auto [key, flag] : {std::pair<std::string, std::string>{"tokenizer.vocab_size", "--vocab-size"},
                               {"tokenizer.character_coverage", "--character-coverage"},
                               {"tokenizer.byte_fallback", "--byte-fallback"}}) {
        for (auto at = why.find(key); at != std::string::npos; at = why.find(key, at + flag.size())) why.replace(at, key.size(), flag);
      }
      throw DataError(why);
    }
    tokenizer::Tokenizer tok(t->model);
    std::cout << "trained " << tok.vocab_size() << "-piece " << t->model_type << " tokenizer -> " << t->model
              << " (sha256 " << tok.sha256().substr(0, 12) << ")\n";
  });
}

void add_stats_command(CLI::App* tokcmd) {
  struct StatsOpts {
    std::string corpus, sizes = "1000,2000,4000,8000,16000", model_type = "bpe", config;
    std::vector<std::string> models;
    inspect::StatsOptions opt;
  };
  auto st = std::make_shared<StatsOpts>();
  auto* stats = tokcmd->add_subcommand("stats", "Train tokenizers of several sizes on a sample and compare them on held-out "
                                                "text, or compare existing tokenizers (--model, twice or more) on a text");
  stats->add_option("--corpus", st->corpus, "UTF-8 text, one unit per line (e.g. data/kjv/train.txt)")->required();
  stats->add_option("--sizes", st->sizes, "vocabulary sizes to compare")->capture_default_str();
  stats->add_option("--model-type", st->model_type, "bpe | unigram")->capture_default_str();
  stats->add_option("--character-coverage", st->opt.base.character_coverage, "fraction of characters covered")
      ->capture_default_str()->check(CLI::Range(0.5, 1.0));
  stats->add_option("--sample-bytes", st->opt.sample_bytes, "training text taken from the corpus")
      ->capture_default_str()->check(CLI::Range(1, 1 << 30));
  stats->add_option("--heldout-every", st->opt.heldout_every, "every n-th line is held out")
      ->capture_default_str()->check(CLI::Range(2, 1000));
  stats->add_option("-c,--config", st->config, "YAML config whose model section sizes the embedding share (default: defaults)");
  stats->add_option("--threads", st->opt.threads, "trainer threads")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  stats->add_option("--model", st->models,
                    "an existing tokenizer .model to measure on the whole --corpus (repeat: the first is the "
                    "baseline, e.g. a checkpoint's and its fine-tune's extended one)");
  stats->callback([st] {
    if (!st->models.empty()) {
      if (st->models.size() < 2) {
        throw ConfigError("[tokenizer] stats --model: expected two or more tokenizers to compare, got one. Hint: "
                          "--model OLD.model --model NEW.model");
      }
      const std::vector<std::filesystem::path> models(st->models.begin(), st->models.end());
      std::cout << inspect::format_compare(inspect::compare_tokenizers(st->corpus, models), st->corpus);
      return;
    }
    st->opt.base.model_type = tokenizer::parse_model_type(st->model_type);
    if (!st->config.empty()) st->opt.model = config::load_config(st->config, {}).model;  // else GptConfig defaults
    st->opt.sizes = parse_sizes(st->sizes);
    auto report = inspect::tokenizer_stats(st->corpus, st->opt);
    std::cout << "corpus " << st->corpus << "\n" << inspect::format_stats(report, st->opt);
  });
}

void add_codec_commands(CLI::App* tokcmd) {
  struct CodecOpts {
    std::string model, text, file, ids;
    bool pieces = false;
  };
  auto c = std::make_shared<CodecOpts>();
  auto* encode = tokcmd->add_subcommand("encode", "Print the ids (or pieces) of text");
  encode->add_option("--model", c->model, "tokenizer .model file")->required();
  encode->add_option("--text", c->text, "text to encode (default: --file or stdin)");
  encode->add_option("--file", c->file, "file to encode");
  encode->add_flag("--pieces", c->pieces, "print pieces instead of ids");
  encode->callback([c] {
    tokenizer::Tokenizer tok(c->model);
    // one output line per input line, as `prepare` makes one unit of each line
    std::istringstream lines(text_or_stdin(c->text, c->file));
    for (std::string line; std::getline(lines, line);) {
      const auto ids = tok.encode(line);
      for (size_t i = 0; i < ids.size(); ++i) {
        std::cout << (i ? " " : "") << (c->pieces ? tok.piece(ids[i]) : std::to_string(ids[i]));
      }
      std::cout << "\n";
    }
  });
  auto* decode = tokcmd->add_subcommand("decode", "Turn space-separated ids back into text (one line per line of ids)");
  decode->add_option("--model", c->model, "tokenizer .model file")->required();
  decode->add_option("--ids", c->ids, "ids, e.g. \"12 7 99\" (default: stdin, one line of ids per output line)");
  decode->callback([c] {
    tokenizer::Tokenizer tok(c->model);
    std::istringstream lines(c->ids.empty() ? text_or_stdin("", "") : c->ids);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream in(line);
      std::vector<int32_t> ids;
      std::string text;
      for (std::string word; in >> word;) {
        size_t used = 0;
        long v = -1;
        try {
          v = std::stol(word, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != word.size() || v < 0 || v >= tok.vocab_size()) {
          throw ConfigError("[tokenizer] decode: expected ids 0.." + std::to_string(tok.vocab_size() - 1) +
                            " separated by spaces, got '" + word + "'");
        }
        if (v == tok.eos_id()) {  // </s> ends a line of text, as in `sample`
          text += tok.decode(ids) + "\n";
          ids.clear();
        } else {
          ids.push_back(static_cast<int32_t>(v));
        }
      }
      std::cout << text << tok.decode(ids) << "\n";
    }
  });
}

}  // namespace

void add_tokenizer_commands(CLI::App& app) {
  auto* tokcmd = app.add_subcommand("tokenizer", "Train a SentencePiece tokenizer, encode or decode text");
  tokcmd->require_subcommand(1);
  add_train_command(tokcmd);
  add_stats_command(tokcmd);
  add_codec_commands(tokcmd);
}

}  // namespace lm::cli
