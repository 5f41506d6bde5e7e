// `lmtrain sample`: next-token probability table for a prompt, and optional generation.
#include <cstdio>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "cli/app.h"
#include "sample/sampler.h"
#include "util/threads.h"

namespace lm::cli {
namespace {

// Decodes ids, rendering each end-of-line id as a newline (the tokenizer itself drops it).
std::string render(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out;
  std::vector<int32_t> run;
  for (int32_t id : ids) {
    if (id == tok.eos_id()) {
      out += tok.decode(run) + "\n";
      run.clear();
    } else {
      run.push_back(id);
    }
  }
  return out + tok.decode(run);
}

// Left-aligns UTF-8 text in `width` columns (counting code points, so "▁the" is 4 wide, not 6).
std::string pad(const std::string& s, size_t width) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
  return s + std::string(cols < width ? width - cols : 0, ' ');
}

}  // namespace

void add_sample_commands(CLI::App& app) {
  struct Opts {
    std::string checkpoint, prompt;
    int top_k = 10;
    sample::GenerateOptions gen{0, 1.0, 0, 0, -1};
    int threads = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("sample", "Next-token probabilities after a prompt, and generated text");
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint directory, or a run directory (uses its `latest`)")->required();
  cmd->add_option("--prompt", o->prompt, "text to condition on (a line start is implied)")->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "rows of the table; also limits sampling to the k most likely when generating")
      ->capture_default_str();
  cmd->add_option("--generate", o->gen.max_new_tokens, "tokens to generate after the prompt (0 = table only)")
      ->capture_default_str();
  cmd->add_option("--temperature", o->gen.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--seed", o->gen.seed, "sampling seed (same seed, same text)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "compute threads")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->callback([o] {
    util::set_compute_threads(o->threads);
    auto ck = checkpoint::load_checkpoint(o->checkpoint);
    tokenizer::Tokenizer tok(ck.tokenizer_model);
    auto context = sample::prompt_context(tok, o->prompt);
    auto probs = sample::next_token_probs(*ck.model, context);
    std::cout << "checkpoint " << ck.dir.string() << " (step " << ck.state.step << ")\n";
    std::cout << "next-token distribution after \"" << o->prompt << "\" (" << context.size() << " context tokens)\n";
    std::printf("%5s  %s %7s  %9s\n", "rank", pad("piece", 20).c_str(), "id", "prob");
    for (const auto& row : sample::top_k(probs, o->top_k, tok)) {
      std::printf("%5d  %s %7d  %9.6f\n", row.rank, pad(row.piece, 20).c_str(), row.id, row.prob);
    }
    if (o->gen.max_new_tokens > 0) {
      o->gen.top_k = o->top_k;
      auto ids = sample::generate(*ck.model, context, o->gen);
      std::cout << "\ngenerated " << ids.size() << " tokens (temperature " << o->gen.temperature << ", top-k "
                << o->gen.top_k << ", seed " << o->gen.seed << "):\n";
      std::vector<int32_t> all(context.begin() + (context.front() == tok.eos_id() ? 1 : 0), context.end());
      all.insert(all.end(), ids.begin(), ids.end());
      std::cout << render(tok, all) << "\n";
    }
    std::fflush(stdout);
  });
}

}  // namespace lm::cli
