// `lmtrain prepare`: a text corpus into a token file. Free of LibTorch, so the small `lmtrain` front
// executable runs it without loading LibTorch (docs/ARCHITECTURE.md "Two executables").
#include <iostream>
#include <memory>
#include <string>

#include "cli/app_base.h"
#include "data/prepare.h"
#include "tokenizer/tokenizer.h"

namespace lm::cli {

void add_data_commands(CLI::App& app) {
  struct PrepOpts {
    std::string tokenizer, input, output;
  };
  auto o = std::make_shared<PrepOpts>();
  auto* prep = app.add_subcommand("prepare", "Encode a text corpus into a token file (one line = one unit + </s>)");
  prep->add_option("--tokenizer", o->tokenizer, "tokenizer .model file")->required();
  prep->add_option("--input", o->input, "UTF-8 text file")->required();
  prep->add_option("--output", o->output, "token file to write (.bin)")->required();
  prep->callback([o] {
    tokenizer::Tokenizer tok(o->tokenizer);
    auto info = data::prepare_corpus(o->input, tok, o->output);
    std::cout << "wrote " << o->output << ": " << info.count << " tokens, " << info.id_bytes << "-byte ids, vocab "
              << info.vocab_size << "\n";
  });
}

}  // namespace lm::cli
