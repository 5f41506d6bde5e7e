#include "train/run_data.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "data/paragraphs.h"
#include "data/prepare.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/model_spec.h"
#include "tokenizer/tokenizer.h"
#include "util/faults.h"
#include "util/clock.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/signals.h"

namespace lm::train {
namespace fs = std::filesystem;

namespace {

using util::Clock;
using util::seconds_since;

// The run's tokenizer: a fine-tune keeps the checkpoint's (the token table rows mean those pieces); a new
// run trains one unless the existing one was trained on the same corpus with the same settings.
// ", with byte pieces" or ", no byte pieces (...)": whether an unknown character reads as its bytes or as <unk>.
std::string byte_pieces(const fs::path& model) {
  return tokenizer::read_model_spec(model).byte_fallback
             ? ", with byte pieces"
             : ", no byte pieces (an unknown character reads as <unk>; tokenizer.byte_fallback adds them)";
}

// finetune.new_pieces: the checkpoint's tokenizer with the new text's pieces appended (made once; a resume
// finds it current).
void extend_run_tokenizer(const TrainJob& job, const fs::path& path) {
  const auto t0 = Clock::now();
  if (!job.resume_from.empty()) {  // the checkpoint's own, which preflight_resume found to be this extension
    for (const std::string ext : {"", ".json"}) {  // the model and its sidecar
      const fs::path from = job.resume_from / ("tokenizer.model" + ext), to = path.string() + ext;
      if (!fs::is_regular_file(to) || util::sha256_file(to) != util::sha256_file(from)) {
        util::atomic_write_file(to, util::read_file(from, "checkpoint tokenizer"));
      }
    }
    const auto e = tokenizer::read_extension(path);
    spdlog::info("tokenizer: {} (from {}: {} pieces appended to {}'s {}){}", path.string(), job.resume_from.string(),
                 e.pieces.size(), job.init_from.string(), e.old_vocab, byte_pieces(path));
    return;
  }
  const fs::path src = job.init_from / "tokenizer.model";
  const auto [e, made] = tokenizer::ensure_extended_tokenizer(src, job.train_files, job.new_pieces, job.tokenizer,
                                                              job.run.threads, job.run.seed, path);

  const auto intermediate = std::count_if(e.pieces.begin(), e.pieces.end(), [](auto& p) { return p.intermediate; });
  const std::string what = job.new_pieces.list.empty() ? "from a tokenizer trained on " + tokenizer::describe_files(job.train_files)
                                                       : "listed in " + job.new_pieces.list.string();
  spdlog::info("tokenizer: {} {} (from {}): {} pieces appended{}, {}; vocabulary {} -> {}{}{}", path.string(),
               made ? "extended" : "is current", src.string(), e.pieces.size(),
               intermediate ? fmt::format(" ({} of them needed on the way to others)", intermediate) : std::string(),
               what, e.old_vocab, e.vocab_size(), made ? fmt::format(" in {:.1f}s", seconds_since(t0)) : std::string(),
               byte_pieces(path));
}

void ensure_run_tokenizer(const TrainJob& job, const fs::path& path) {
  const auto t0 = Clock::now();
  // A resume continues with its checkpoint's tokenizer (preflight compared its settings with the config).
  const fs::path ckpt = !job.init_from.empty() ? job.init_from : job.resume_from;
  if (!ckpt.empty() && job.new_pieces.active() && !job.init_from.empty()) {
    extend_run_tokenizer(job, path);
    return;
  }
  if (!ckpt.empty()) {
    const fs::path src = ckpt / "tokenizer.model";
    if (!fs::is_regular_file(path) || util::sha256_file(path) != util::sha256_file(src)) {
      util::atomic_write_file(path, util::read_file(src, "checkpoint tokenizer"));
    }
    tokenizer::forget_extension(path);  // an earlier fine-tune's extension describes another model
    spdlog::info("tokenizer: {} (from {}){}", path.string(), ckpt.string(), byte_pieces(path));
    return;
  }
  const std::string from = tokenizer::describe_files(job.train_files);
  spdlog::info("tokenizer: preparing {} from {}", path.string(), from);
  if (tokenizer::ensure_tokenizer(job.train_files, path, job.tokenizer, job.run.threads, job.run.seed)) {
    spdlog::info("tokenizer: trained {} {} pieces on {} in {:.1f}s -> {}{}", tokenizer::to_string(job.tokenizer.model_type),
                 job.tokenizer.vocab_size, from, seconds_since(t0), path.string(), byte_pieces(path));
  } else {
    spdlog::info("tokenizer: {} is current{}", path.string(), byte_pieces(path));
  }
}

}  // namespace

void prepare_run_text(const TrainJob& job) {
  if (job.unit == tokenizer::TextUnit::kLine) {
    const fs::path first = job.split ? job.split->source : job.train_files.at(0);
    std::ifstream in(first, std::ios::binary);
    std::string head(size_t{1} << 20, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    const std::string why = data::hard_wrap_evidence(head);
    if (!why.empty()) {
      spdlog::warn("data: '{}' looks hard-wrapped ({}): each line is a unit of training, so samples break every few "
                   "words. Hint: set data.unit: paragraph to join each paragraph's lines", first.string(), why);
    }
    return;
  }
  for (const auto& [source, copy] : job.paragraph_copies) {
    tokenizer::CorpusReader reader({source});
    std::string text, block;
    while (reader.next(block)) text += block;
    data::JoinCounts counts;
    const std::string joined = data::join_paragraphs(text, &counts);
    std::error_code ec;
    fs::create_directories(copy.parent_path(), ec);
    if (ec) throw SaveError("[data] cannot create '" + copy.parent_path().string() + "': " + ec.message());
    if (!fs::is_regular_file(copy, ec) || util::read_file(copy, "paragraph copy") != joined) {
      util::atomic_write_file(copy, joined);
    }
    spdlog::info("data: '{}': {} paragraphs ({} wrapped lines joined, {} inside a word) -> {}", source.string(),
                 counts.paragraphs, counts.wraps, counts.without_space, copy.string());
  }
}

void prepare_run_data(const TrainJob& job) {
  RunPaths paths(job.run_dir());
  fs::create_directories(job.run_dir());
  util::fault_hooks().reached("prepare:tokenizer");  // test builds may hold here (util/faults.h)
  ensure_run_tokenizer(job, paths.tokenizer);
  tokenizer::Tokenizer tok(paths.tokenizer);
  for (const auto& [text, bin] : {std::pair{job.train_files, paths.train_bin}, std::pair{job.val_files, paths.val_bin}}) {
    if (data::token_file_is_current(text, tok, bin)) {
      spdlog::info("prepare: {} is current", bin.string());
      continue;
    }
    util::fault_hooks().reached("prepare:encode");
    if (util::stop_signal() != 0) break;  // stop before the next file; finished ones are kept
    const auto t0 = Clock::now();
    data::PrepareOptions opts;
    opts.shard_tokens = job.shard_tokens;
    opts.check_stop = [] {  // Ctrl-C in a long corpus: stop between blocks, nothing half-written kept
      if (const int sig = util::stop_signal(); sig != 0) {
        throw Interrupted(util::exit_code_for_signal(sig),
                          "[train] stopped by " + std::string(util::signal_name(sig)) +
                              " while encoding the corpus, before any step; no checkpoint was written (the finished "
                              "tokenizer is kept and reused)");
      }
    };
    auto info = data::prepare_corpus(text, tok, bin, opts);
    spdlog::info("prepare: {} -> {} ({} tokens, {}-byte ids{}, {:.1f}s)", tokenizer::describe_files(text),
                 info.shards > 1 || text.size() > 1 ? data::index_path(bin).string() : bin.string(), info.count,
                 info.id_bytes, info.shards > 1 ? fmt::format(", {} shards", info.shards) : std::string(),
                 seconds_since(t0));
  }
  if (const int sig = util::stop_signal(); sig != 0) {  // Ctrl-C during tokenizer training or encoding
    throw Interrupted(util::exit_code_for_signal(sig),
                      "[train] stopped by " + std::string(util::signal_name(sig)) +
                          " during data preparation, before any step; no checkpoint was written (finished tokenizer "
                          "and token files are kept and reused)");
  }
}

RunData::RunData(const fs::path& run_dir)
    : paths(run_dir),
      tokenizer(paths.tokenizer),
      train(paths.train_bin),
      val(paths.val_bin),
      identity{tokenizer.sha256(), train.info().source_sha256, val.info().source_sha256, train.size(), val.size()},
      extension(tokenizer::read_extension(paths.tokenizer)),
      extension_file(extension.old_vocab > 0 ? fs::path(paths.tokenizer.string() + ".json") : fs::path()) {}

RunData run_data(const TrainJob& job) {
  RunData data(job.run_dir());
  if (job.contrastive) data.identity.pairs = pairs_identity(*job.contrastive);
  return data;
}

}  // namespace lm::train
