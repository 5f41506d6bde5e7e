#include "inspect/tokenizer_stats.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "inspect/params.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/text.h"

namespace lm::inspect {
namespace fs = std::filesystem;

namespace {

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

int64_t words(const std::string& s) {
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    const bool space = c == ' ' || c == '\t' || c == '\r';
    n += !space && !in_word;
    in_word = !space;
  }
  return n;
}

// A scratch directory removed on every exit path.
struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("lmtrain-tokstats-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

StatsReport tokenizer_stats(const fs::path& corpus, const StatsOptions& opt) {
  std::istringstream in(tokenizer::read_corpus(corpus, "stats corpus"));
  std::vector<std::string> heldout;
  std::string sample, line;
  StatsReport r;
  for (int64_t i = 0; std::getline(in, line);) {
    if (line.empty()) continue;
    if (++i % opt.heldout_every == 0) {
      heldout.push_back(line);
    } else if (static_cast<int64_t>(sample.size()) < opt.sample_bytes) {
      sample += line + "\n";
      ++r.sample_lines;
    }
  }
  if (heldout.empty() || sample.empty()) {
    throw DataError("[tokenizer] stats: expected at least " + std::to_string(opt.heldout_every) + " non-empty lines in " +
                    corpus.string() + " (every " + std::to_string(opt.heldout_every) + "th is held out)");
  }
  r.sample_bytes = static_cast<int64_t>(sample.size());
  r.heldout_lines = static_cast<int64_t>(heldout.size());
  for (auto& l : heldout) {
    r.heldout_chars += code_points(l);
    r.heldout_words += words(l);
  }
  TempDir tmp;
  const fs::path sample_file = tmp.path / "sample.txt";
  util::atomic_write_file(sample_file, sample);
  for (int v : opt.sizes) {
    SizeStats s;
    s.vocab_size = v;
    tokenizer::TokenizerConfig cfg = opt.base;
    cfg.vocab_size = v;
    const fs::path model_file = tmp.path / ("v" + std::to_string(v) + ".model");
    const auto t0 = util::Clock::now();
    try {
      tokenizer::train_tokenizer({sample_file}, model_file, cfg, opt.threads);
    } catch (const DataError& e) {
      s.error = e.what();
      r.sizes.push_back(s);
      continue;
    }
    s.train_seconds = util::seconds_since(t0);
    tokenizer::Tokenizer tok(model_file);
    const auto bytes_of = tokenizer::decoded_bytes_per_id(tok);
    int64_t tokens = 0, over = 0, bytes = 0;
    for (auto& l : heldout) {
      const auto ids = tok.encode(l);
      const auto n = static_cast<int64_t>(ids.size());
      tokens += n;
      over += n + 1 > opt.model.max_seq_len;  // + the line-start id every line gets
      for (int32_t id : ids) bytes += bytes_of[static_cast<size_t>(id)];
    }
    s.bytes_per_token = static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(1, tokens));
    s.tokens_per_char = static_cast<double>(tokens) / static_cast<double>(r.heldout_chars);
    s.tokens_per_word = static_cast<double>(tokens) / static_cast<double>(std::max<int64_t>(1, r.heldout_words));
    s.mean_line_tokens = static_cast<double>(tokens) / static_cast<double>(r.heldout_lines);
    s.lines_over_context = static_cast<double>(over) / static_cast<double>(r.heldout_lines);
    model::GptConfig arch = opt.model;
    arch.vocab_size = tok.vocab_size();
    const auto pc = count_params(arch);
    s.embedding_params = pc.embedding;
    s.embedding_share = static_cast<double>(pc.embedding) / static_cast<double>(pc.total);
    r.sizes.push_back(s);
  }
  return r;
}

CompareReport compare_tokenizers(const fs::path& corpus, const std::vector<fs::path>& models) {
  const std::string text = tokenizer::read_corpus(corpus, "corpus");
  std::vector<tokenizer::Tokenizer> toks;
  CompareReport r;
  for (const auto& m : models) {
    toks.emplace_back(m);
    r.models.push_back({m, toks.back().vocab_size(), 0, 0, 0});
  }
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++r.lines;
    r.bytes += static_cast<int64_t>(line.size());
    std::vector<int32_t> first;
    for (size_t i = 0; i < toks.size(); ++i) {
      const auto ids = toks[i].encode(line);
      auto& c = r.models[i];
      c.pieces += static_cast<int64_t>(ids.size());
      if (i == 0) {
        first = ids;
        continue;
      }
      c.lines_changed += ids != first;
      for (int32_t id : ids) c.pieces_past_first += id >= r.models[0].vocab_size;
    }
  }
  return r;
}

std::string format_compare(const CompareReport& r, const fs::path& corpus) {
  std::string out = "corpus " + corpus.string() + ": " + std::to_string(r.lines) + " non-blank lines, " +
                    util::with_commas(r.bytes) + " bytes\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-40s %8s %12s %10s %9s %15s %15s\n", "tokenizer", "vocab", "pieces", "pieces/B",
                "vs first", "lines changed", "added pieces");
  out += buf;
  for (const auto& c : r.models) {
    const double per_byte = r.bytes ? static_cast<double>(c.pieces) / static_cast<double>(r.bytes) : 0.0;
    const double ratio = r.models[0].pieces ? static_cast<double>(c.pieces) / static_cast<double>(r.models[0].pieces) : 0.0;
    std::snprintf(buf, sizeof buf, "%-40s %8d %12s %10.4f %8.3fx %14.1f%% %14.1f%%\n", c.model.string().c_str(), c.vocab_size,
                  util::with_commas(c.pieces).c_str(), per_byte, ratio,
                  r.lines ? 100.0 * static_cast<double>(c.lines_changed) / static_cast<double>(r.lines) : 0.0,
                  c.pieces ? 100.0 * static_cast<double>(c.pieces_past_first) / static_cast<double>(c.pieces) : 0.0);
    out += buf;
  }
  out += "(vs first: pieces against the first tokenizer's; lines changed: lines whose ids differ from the first's; "
         "added pieces: the share of ids at or past the first's vocabulary size)\n";
  return out;
}

std::string format_stats(const StatsReport& r, const StatsOptions& opt) {
  std::string out;
  char buf[512];
  const auto& m = opt.model;
  std::snprintf(buf, sizeof buf,
                "%s tokenizers trained on %lld lines (%lld bytes); measured on %lld held-out lines (every %lldth): "
                "%lld characters, %lld words\nmodel size for the embedding share: C=%lld L=%lld H=%lld T=%lld, %s head\n\n",
                to_string(opt.base.model_type).c_str(), static_cast<long long>(r.sample_lines),
                static_cast<long long>(r.sample_bytes), static_cast<long long>(r.heldout_lines),
                static_cast<long long>(opt.heldout_every), static_cast<long long>(r.heldout_chars),
                static_cast<long long>(r.heldout_words), static_cast<long long>(m.d_model), static_cast<long long>(m.n_layers),
                static_cast<long long>(m.n_heads), static_cast<long long>(m.max_seq_len), m.tie_embeddings ? "tied" : "untied");
  out += buf;
  std::snprintf(buf, sizeof buf, "%7s %10s %10s %10s %14s %12s %14s %9s %7s\n", "vocab", "tok/char", "tok/word",
                "bytes/tok", "tokens/line", "lines > T", "embedding", "share", "train");
  out += buf;
  for (const auto& s : r.sizes) {
    if (!s.error.empty()) {
      std::snprintf(buf, sizeof buf, "%7d  not trainable on this sample: %s\n", s.vocab_size, s.error.c_str());
      out += buf;
      continue;
    }
    std::snprintf(buf, sizeof buf, "%7d %10.4f %10.3f %10.3f %7.1f / %-4lld %11.2f%% %14s %8.1f%% %6.1fs\n", s.vocab_size,
                  s.tokens_per_char, s.tokens_per_word, s.bytes_per_token, s.mean_line_tokens, static_cast<long long>(m.max_seq_len), 100.0 * s.lines_over_context,
                  util::with_commas(s.embedding_params).c_str(), 100.0 * s.embedding_share, s.train_seconds);
    out += buf;
  }
  out += "\nfewer tokens per character = shorter sequences (more text per context window, less compute per\n"
         "character); a bigger vocabulary costs V x C embedding parameters and rarer rows that train less.\n"
         "bytes/tok (UTF-8 bytes a token decodes to) converts a validation loss between vocabularies: bits per byte =\n"
         "nats per token / ln 2 / bytes per token; lmtrain reports bits per byte at every validation.\n";
  return out;
}

}  // namespace lm::inspect
