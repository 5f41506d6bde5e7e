// `lmtrain prepare`: a text corpus (a file, a directory or a glob) into token data; `lmtrain corpus get`: the
// example corpora from Debian packages. Free of LibTorch, so the small `lmtrain` front executable runs them
// without loading LibTorch (docs/ARCHITECTURE.md "Two executables").
#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "cli/app_base.h"
#include "data/corpus.h"
#include "data/prepare.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/signals.h"

namespace lm::cli {

void add_data_commands(CLI::App& app) {
  struct PrepOpts {
    std::string tokenizer, input, output;
    data::PrepareOptions prep;
    double block_mb = static_cast<double>(tokenizer::kDefaultBlockBytes) / (1 << 20);
  };
  auto o = std::make_shared<PrepOpts>();
  auto* prep = app.add_subcommand("prepare", "Encode a text corpus into token data (one line = one unit + </s>)");
  prep->add_option("--tokenizer", o->tokenizer, "tokenizer .model file")->required();
  prep->add_option("--input", o->input, "UTF-8 text: a file, a directory (its files, recursively) or a quoted glob")
      ->required();
  prep->add_option("--output", o->output, "token data to write: NAME.bin (or NAME.index.json + NAME-NNNNN.bin shards)")
      ->required();
  prep->add_option("--threads", o->prep.threads, "encoder threads (0 = auto: the usable cores, at most 8)")
      ->capture_default_str()->check(CLI::Range(0, 64));
  prep->add_option("--block-mb", o->block_mb, "text per block of lines handed to a thread, in MiB")
      ->capture_default_str()->check(CLI::Range(0.001, 1024.0));
  prep->add_option("--shard-tokens", o->prep.shard_tokens, "token ids per output shard")
      ->capture_default_str()->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 40));
  prep->callback([o] {
    // SIGINT/SIGTERM stop the encoding between blocks: its temporary shards are removed, an earlier output
    // stays as it was, and the exit code is 130/143.
    util::install_stop_handlers();
    o->prep.check_stop = [] {
      const int sig = util::stop_signal();
      if (sig == 0) return;
      const std::string by = util::signal_name(sig);
      throw Interrupted(util::exit_code_for_signal(sig),
                        "[prepare] stopped by " + by +
                            " while encoding; nothing was written (an earlier output is as it was)");
    };
    const auto files = tokenizer::list_corpus_files(o->input, "corpus");
    tokenizer::Tokenizer tok(o->tokenizer);
    o->prep.block_bytes = static_cast<size_t>(o->block_mb * (1 << 20));
    data::PrepareStats stats;
    const auto t0 = std::chrono::steady_clock::now();
    auto info = data::prepare_corpus(files, tok, o->output, o->prep, &stats);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "wrote " << (info.shards > 1 || files.size() > 1 ? data::index_path(o->output).string() : o->output)
              << ": " << info.count << " tokens, " << info.id_bytes << "-byte ids, vocab " << info.vocab_size << ", "
              << info.shards << (info.shards == 1 ? " shard" : " shards") << "; " << files.size()
              << (files.size() == 1 ? " file, " : " files, ") << stats.bytes << " bytes, " << stats.lines << " lines in "
              << s << " s on " << stats.threads << (stats.threads == 1 ? " thread" : " threads") << "\n";
  });
}

void add_corpus_commands(CLI::App& app) {
  auto* corpus = app.add_subcommand("corpus", "The example corpora, from installed Debian packages")->require_subcommand(1);
  auto name = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* get = corpus->add_subcommand(
      "get", "Write DIR/train.txt and DIR/val.txt (the last tenth of the lines) from an installed Debian package");
  get->add_option("name", *name, "kjv (package bible-kjv) | debian-faq | debian-faq-ko")
      ->required()
      ->check(CLI::IsMember(data::corpus_names()));
  get->add_option("--out", *out, "output directory (default: data/NAME under the working directory)");
  get->callback([name, out] {
    std::cout << data::fetch_corpus(*name, out->empty() ? "data/" + *name : *out) << "\n";
  });
}

}  // namespace lm::cli
