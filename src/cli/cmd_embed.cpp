// `lmtrain embed`: one vector per line (inspect/embed.h), written to --out, or a --query searched against an
// embedded file whose vectors are cached beside it (keyed by the file's and the checkpoint's SHA-256 and the
// options).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "checkpoint/safetensors.h"
#include "cli/commands.h"
#include "inspect/embed.h"
#include "sample/sampler.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::cli {
namespace fs = std::filesystem;

namespace {

struct EmbedOpts {
  std::string checkpoint, file, out, pool = "mean", query, precision = "auto";
  std::vector<std::string> texts;
  int layer = -1, k = 5;
  int64_t batch = 32;
  bool from_input = false, query_given = false, pool_given = false;
};

// A live "[embed] [#########.....................] 320/1000 lines" on a terminal; nothing otherwise.
void show_progress(size_t done, size_t total) {
  if (!isatty(STDERR_FILENO)) return;
  constexpr size_t kWidth = 30;
  const size_t filled = total == 0 ? kWidth : kWidth * done / total;
  std::fprintf(stderr, "\r[embed] [%s%s] %zu/%zu lines", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// The cached vectors of --file when their key matches, else computed and cached (a cache that cannot be
// written is reported and skipped: the search still runs).
torch::Tensor cached_vectors(model::GptImpl& model, const tokenizer::Tokenizer& tok, const std::vector<std::string>& lines,
                             const inspect::EmbedOptions& eo, const fs::path& file, const std::string& key,
                             std::map<std::string, std::string> metadata) {
  const fs::path cache = inspect::cache_path(file);
  if (fs::exists(cache)) {
    try {
      const auto st = checkpoint::read_safetensors(cache);
      const auto k = st.metadata.find("key");
      if (k != st.metadata.end() && k->second == key && st.tensors.size() == 1 &&
          st.tensors[0].second.size(0) == static_cast<int64_t>(lines.size())) {
        spdlog::info("[embed] reusing the cached vectors of {} lines: {}", lines.size(), cache.string());
        return st.tensors[0].second;
      }
      spdlog::info("[embed] the cache {} was made from another file, checkpoint or options: embedding again", cache.string());
    } catch (const Error& e) {
      spdlog::warn("[embed] the cache {} cannot be read ({}): embedding again", cache.string(), e.what());
    }
  }
  auto e = inspect::embed_texts(model, tok, lines, eo, show_progress);
  metadata["key"] = key;
  try {
    inspect::write_embeddings(cache, e.vectors, lines, metadata, "the cache");
    spdlog::info("[embed] cached the vectors of {} lines in {}", lines.size(), cache.string());
  } catch (const Error& err) {
    spdlog::warn("[embed] the vectors were not cached: {}", err.what());
  }
  return e.vectors;
}

// The --query's hits among the lines, best first.
void print_hits(const std::vector<std::pair<int64_t, double>>& hits, const std::vector<std::string>& lines, const EmbedOpts& o,
                const std::string& options) {
  std::cout << "nearest lines of " << o.file << " to \"" << o.query << "\" (" << options << ", cosine):\n";
  char buf[64];
  for (size_t i = 0; i < hits.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%3zu  %.4f  line %-6lld  ", i + 1, hits[i].second, static_cast<long long>(hits[i].first + 1));
    std::cout << buf << lines[static_cast<size_t>(hits[i].first)] << "\n";
  }
}

// Every flag that can be checked before the checkpoint is read.
inspect::EmbedOptions check_flags(const EmbedOpts& o) {
  if (o.file.empty() == o.texts.empty()) throw ConfigError("[embed] expected exactly one of --file or --text");
  if (o.out.empty() && !o.query_given) throw ConfigError("[embed] expected --out (write the vectors) or --query (search them), or both");
  if (o.query_given && o.file.empty()) throw ConfigError("[embed] --query searches the lines of --file: expected --file");
  if (o.query_given && o.query.find_first_not_of(" \t") == std::string::npos) {
    throw ConfigError("[embed] --query: expected text to search for, got a blank one");
  }
  inspect::EmbedOptions eo;
  eo.pool = inspect::parse_pool(o.pool);
  eo.layer = o.layer;
  eo.from_input = o.from_input;
  eo.batch = o.batch;
  if (eo.from_input && (eo.layer != -1 || o.pool_given)) {
    throw ConfigError("[embed] --from-input: expected no --layer or --pool with it (it is the mean of the raw input rows)");
  }
  if (!o.out.empty()) inspect::check_embedding_output(o.out);
  return eo;
}

void run_embed(const EmbedOpts& o) {
  inspect::EmbedOptions eo = check_flags(o);
  auto ck = checkpoint::load_checkpoint(o.checkpoint, reading_ops(o.precision, "cpu"));
  if (const auto ft = config::checkpoint_finetune(ck.config_yaml); ft.objective == train::Objective::kContrastive) {
    if (!o.pool_given && !o.from_input && eo.layer == -1) {
      eo.pool = ft.pool;  // the encoder's own pooling
      spdlog::info("[embed] --pool {}: the pooling this encoder was trained with (finetune.pool in its config.yaml)",
                   model::to_string(ft.pool));
    } else if (o.pool_given && eo.pool != ft.pool) {
      spdlog::warn("[embed] --pool {}: this encoder was trained with finetune.pool {}", model::to_string(eo.pool),
                   model::to_string(ft.pool));
    }
  }
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  const int64_t L = ck.arch.n_layers;
  if (eo.layer < -1 || eo.layer > L) {
    throw ConfigError("[embed] --layer: expected 0.." + std::to_string(L) + " (0 = the input vectors, N = after block N-1), got " +
                      std::to_string(eo.layer));
  }
  std::vector<std::string> lines;
  std::string lines_sha;
  if (!o.file.empty()) {
    lines = inspect::read_lines(o.file);
    lines_sha = util::sha256_file(o.file);
  } else {
    std::string joined;
    for (const auto& t : o.texts) {
      if (t.find_first_not_of(" \t") == std::string::npos) throw ConfigError("[embed] --text: expected text, got a blank one");
      joined += t + "\n";
    }
    lines = o.texts;
    lines_sha = util::sha256_hex(joined);
  }
  if (o.query_given && (o.k < 1 || o.k > static_cast<int>(lines.size()))) {
    throw ConfigError("[embed] -k: expected 1.." + std::to_string(lines.size()) + " (the lines), got " + std::to_string(o.k));
  }
  const auto check = inspect::check_lines(tok, lines, ck.arch.max_seq_len);  // before any forward pass
  if (o.query_given && sample::prompt_context(tok, o.query).size() < 2) {
    throw ConfigError("[embed] --query: expected text, got one that encodes to no pieces. Hint: use words the tokenizer knows.");
  }
  if (check.unknown_lines > 0) {
    spdlog::warn("[embed] {} of {} lines hold characters the tokenizer does not know ({}): they read as the unknown piece "
                 "<unk> (id {})", check.unknown_lines, lines.size(), util::join(check.unknown_characters, " "), tok.unk_id());
  }
  if (check.cut > 0) {
    spdlog::info("[embed] {} of {} lines were longer than the context and were cut to their first {} pieces", check.cut,
                 lines.size(), ck.arch.max_seq_len - 1);
  }
  const std::string model_sha = util::sha256_file(ck.dir / "model.safetensors");
  const std::string options = inspect::describe(eo);
  // The products' precision is part of what made the vectors (bf16 ones differ in their last bits).
  const std::string precision = util::precision_name(ck.model->ops()->dtype());
  std::map<std::string, std::string> metadata = {
      {"lines_sha256", lines_sha},  {"checkpoint", ck.dir.string()}, {"checkpoint_step", std::to_string(ck.state.step)},
      {"model_sha256", model_sha}, {"options", options},            {"count", std::to_string(lines.size())},
      {"cut", std::to_string(check.cut)},          {"precision", precision}};
  const std::string key = util::sha256_hex(lines_sha + "\n" + model_sha + "\n" + options + "\n" + precision);
  const torch::Tensor vectors = o.query_given ? cached_vectors(*ck.model, tok, lines, eo, o.file, key, metadata)
                                              : inspect::embed_texts(*ck.model, tok, lines, eo, show_progress).vectors;
  if (!o.out.empty()) {
    inspect::write_embeddings(o.out, vectors, lines, metadata);
    std::cout << "wrote " << vectors.size(0) << " vectors of " << vectors.size(1) << " (" << options << ") to " << o.out << "\n";
  }
  if (o.query_given) {
    const auto q = inspect::embed_texts(*ck.model, tok, {o.query}, eo);
    print_hits(inspect::nearest_lines(vectors, q.vectors[0], o.k), lines, o, options);
  }
}

}  // namespace

void add_embed_commands(CLI::App& app) {
  auto o = std::make_shared<EmbedOpts>();
  auto* cmd = app.add_subcommand("embed", "One vector per line from a checkpoint's hidden states (or its input rows); "
                                          "write them, or search them with --query (docs/inspect.md)");
  add_checkpoint_option(cmd, o->checkpoint, true);
  cmd->add_option("--file", o->file, "UTF-8 text file, one text per line");
  cmd->add_option("--text", o->texts, "a text to embed (repeatable; instead of --file)");
  cmd->add_option("--out", o->out, "vectors to write: .safetensors, .npy or .tsv (+ .metadata.tsv for the Embedding Projector)");
  auto* pool = cmd->add_option("--pool", o->pool, "mean | weighted (later pieces weigh more) | last (the last piece's state)")->capture_default_str();
  cmd->add_option("--layer", o->layer, "hidden states after this many blocks (0 = the input vectors; default: the final ones, after ln_f)");
  cmd->add_flag("--from-input", o->from_input, "the mean of the raw input rows instead: a bag of token embeddings, no context");
  cmd->add_option("--batch", o->batch, "lines per forward pass")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  auto* query = cmd->add_option("--query", o->query, "text to search --file's lines for (nearest by cosine; vectors cached beside the file)");
  cmd->add_option("-k", o->k, "lines --query lists")->capture_default_str();
  add_precision_option(cmd, o->precision);
  cmd->callback([o, pool, query] {
    o->pool_given = pool->count() > 0;
    o->query_given = query->count() > 0;
    run_embed(*o);
  });
}

}  // namespace lm::cli
