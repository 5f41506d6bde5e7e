#include "tokenizer/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/corpus_text.h"
#include "tokenizer/sp_bridge.h"
#include "tokenizer/training_text.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"

namespace lm::tokenizer {
namespace fs = std::filesystem;

namespace {

// Function table resolved from the bridge library once per process.
struct Bridge {
  decltype(&lmsp_train) train;
  decltype(&lmsp_load) load;
  decltype(&lmsp_unload) unload;
  decltype(&lmsp_encode) encode;
  decltype(&lmsp_decode) decode;
  decltype(&lmsp_vocab_size) vocab_size;
  decltype(&lmsp_id_to_piece) id_to_piece;
  decltype(&lmsp_piece_to_id) piece_to_id;
  decltype(&lmsp_special_id) special_id;
  decltype(&lmsp_free) free;
};

template <typename F>
void resolve(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) throw DataError(std::string("[tokenizer] bridge symbol missing: expected ") + name);
}

const Bridge& bridge() {
  static Bridge b;
  static std::once_flag once;
  std::call_once(once, [] {
    fs::path path = bridge_library_path();
#ifdef LMTRAIN_ASAN
    // AddressSanitizer builds (scripts/sanitize.sh): ASan refuses RTLD_DEEPBIND, so the (uninstrumented)
    // bridge gets a link namespace of its own, with its own libc++ and protobuf; memory never crosses the
    // C ABI unowned (lmsp_free), so two heaps are fine.
    void* lib = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
#else
    // DEEPBIND: the bridge binds to its own protobuf-lite before LibTorch's; LOCAL: nobody else sees it.
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
    if (!lib) {
      const char* e = dlerror();
      throw DataError("[tokenizer] cannot load the SentencePiece bridge: expected " + path.string() +
                      ", got " + (e ? e : "unknown error") +
                      ". Hint: set LMTRAIN_SPBRIDGE to liblmtrain_spbridge.so.");
    }
    resolve(lib, "lmsp_train", b.train);
    resolve(lib, "lmsp_load", b.load);
    resolve(lib, "lmsp_unload", b.unload);
    resolve(lib, "lmsp_encode", b.encode);
    resolve(lib, "lmsp_decode", b.decode);
    resolve(lib, "lmsp_vocab_size", b.vocab_size);
    resolve(lib, "lmsp_id_to_piece", b.id_to_piece);
    resolve(lib, "lmsp_piece_to_id", b.piece_to_id);
    resolve(lib, "lmsp_special_id", b.special_id);
    resolve(lib, "lmsp_free", b.free);
  });
  return b;
}

// Takes ownership of a bridge error string.
std::string take_error(char* err) {
  std::string s = err ? err : "unknown error";
  if (err) bridge().free(err);
  return s;
}

}  // namespace

fs::path bridge_library_path() {
  if (const char* env = std::getenv("LMTRAIN_SPBRIDGE"); env && *env) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (ec ? fs::path(".") : exe.parent_path()) / "liblmtrain_spbridge.so";
}

namespace {

// What to do about a failed SentencePiece training, from its message. A vocabulary too large for the text is
// reported by SentencePiece as "Vocabulary size too high (N). Please set it to a value <= M": M, the pieces
// this text yields, is the largest size it accepts, and the hint says so.
std::string training_hint(const std::string& why, const std::string& corpus, const TokenizerConfig& cfg) {
  if (why.find("smaller than required") != std::string::npos) {
    if (cfg.byte_fallback) {
      return "Hint: raise tokenizer.vocab_size (the 256 byte pieces of tokenizer.byte_fallback count too), set "
             "tokenizer.byte_fallback false, or lower tokenizer.character_coverage.";
    }
    return "Hint: raise tokenizer.vocab_size or lower tokenizer.character_coverage.";
  }
  const auto at = why.find("<= ");
  if (why.find("too high") != std::string::npos && at != std::string::npos) {
    const std::string most = why.substr(at + 3, why.find_first_not_of("0123456789", at + 3) - at - 3);
    if (!most.empty()) {
      return "Hint: set tokenizer.vocab_size to at most " + most + ", the largest " + corpus +
             " supports, or train on more text.";
    }
  }
  return "Hint: lower tokenizer.vocab_size or use a larger corpus.";
}

}  // namespace

void train_tokenizer(const CorpusFiles& corpus, const fs::path& model_path, const TokenizerConfig& cfg, int threads,
                     uint64_t seed) {
  if (model_path.has_parent_path()) fs::create_directories(model_path.parent_path());
  const uint64_t bytes = corpus_bytes(corpus);
  const int64_t sample = tokenizer_sample_lines(cfg, bytes);
  fs::path input = corpus.empty() ? fs::path() : corpus.front();
  TrainingText text;
  if (corpus.size() == 1 && sample == 0) {
    read_corpus(input, "training corpus");  // refuses what SentencePiece would misread or report obscurely
  } else {
    text = write_training_text(corpus, model_path.string() + "." + util::temp_suffix() + ".txt", sample, seed);
    input = text.path;
    const int64_t used = text.lines, seen = text.lines_seen;
    if (sample > 0 && used < seen) {
      spdlog::info("tokenizer: training on a sample of {} of {} lines ({:.1f} MB of text{}; seed {}; "
                   "tokenizer.max_sentences sets the size)",
                   used, seen, bytes / 1e6,
                   cfg.max_sentences > 0 ? "" : fmt::format(", above the {} MB for which every line is used",
                                                            kAutoSampleBytes / 1000000),
                   seed);
    }
  }
  // SentencePiece writes PREFIX.model and PREFIX.vocab; train under a temporary prefix and publish the
  // model by rename only after success, so a failed run leaves nothing behind.
  fs::path prefix = model_path.string() + "." + util::temp_suffix();
  const bool nfkc = cfg.normalization == Normalization::kNfkc;
  std::vector<std::pair<std::string, std::string>> kv = {
      {"input", input.string()},
      {"model_prefix", prefix.string()},
      {"vocab_size", std::to_string(cfg.vocab_size)},
      {"model_type", to_string(cfg.model_type)},
      {"character_coverage", std::to_string(cfg.character_coverage)},
      {"num_threads", std::to_string(threads)},
      {"input_sentence_size", "0"},  // the sample, if any, is drawn above
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "16384"},
      {"byte_fallback", cfg.byte_fallback ? "true" : "false"},
      {"normalization_rule_name", nfkc ? "nmt_nfkc" : "identity"},
      {"remove_extra_whitespaces", nfkc ? "true" : "false"},
  };
  std::vector<const char*> keys, values;
  for (auto& [k, v] : kv) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  char* err = nullptr;
  int rc = bridge().train(keys.data(), values.data(), kv.size(), &err);
  fs::path tmp_model = prefix.string() + ".model", tmp_vocab = prefix.string() + ".vocab";
  std::error_code ec;
  fs::remove(tmp_vocab, ec);
  if (rc != 0) {
    fs::remove(tmp_model, ec);
    std::string why = take_error(err);
    while (!why.empty() && (why.back() == '.' || why.back() == '\n')) why.pop_back();
    throw DataError("[tokenizer] SentencePiece training failed for vocab_size=" + std::to_string(cfg.vocab_size) +
                    ": " + why + ". " + training_hint(why, describe_files(corpus), cfg));
  }
  fs::rename(tmp_model, model_path, ec);
  if (ec) throw SaveError("[tokenizer] cannot move the trained model to '" + model_path.string() + "'");
}

bool ensure_tokenizer(const CorpusFiles& corpus, const fs::path& model_path, const TokenizerConfig& cfg, int threads,
                      uint64_t seed) {
  for (const auto& f : corpus) check_corpus_file(f, "training corpus");
  nlohmann::json want = {{"corpus_sha256", corpus_sha256(hash_corpus(corpus))},
                         {"vocab_size", cfg.vocab_size},
                         {"model_type", to_string(cfg.model_type)},
                         {"character_coverage", cfg.character_coverage},
                         {"max_sentences", cfg.max_sentences},
                         {"byte_fallback", cfg.byte_fallback},
                         {"normalization", to_string(cfg.normalization)}};
  // The seed matters only to a sample; recorded then alone, so sidecars of whole-corpus tokenizers stay current.
  if (tokenizer_sample_lines(cfg, corpus_bytes(corpus)) > 0) want["sample_seed"] = seed;
  const fs::path sidecar = model_path.string() + ".json";
  if (fs::is_regular_file(model_path) && fs::is_regular_file(sidecar)) {
    try {
      auto had = nlohmann::json::parse(util::read_file(sidecar));
      // Sidecars from before these settings existed describe tokenizers trained without either.
      if (had.is_object() && !had.contains("byte_fallback")) had["byte_fallback"] = false;
      if (had.is_object() && !had.contains("normalization")) had["normalization"] = "nfkc";
      // ... and before lmtrain drew its own sample (SentencePiece drew it): kept, not retrained.
      if (had.is_object() && !had.contains("sample_seed") && want.contains("sample_seed")) {
        had["sample_seed"] = want["sample_seed"];
      }
      if (had == want) return false;
    } catch (const nlohmann::json::exception&) {
      // unreadable sidecar: retrain
    }
  }
  train_tokenizer(corpus, model_path, cfg, threads, seed);
  util::atomic_write_file(sidecar, want.dump(2) + "\n");
  return true;
}

struct Tokenizer::Handle {
  lmsp_processor* p = nullptr;
  ~Handle() {
    if (p) bridge().unload(p);
  }
};

Tokenizer::Tokenizer(const fs::path& model_path) : h_(std::make_unique<Handle>()) {
  if (const auto p = util::read_problem(model_path); p && p->denied) {
    throw DataError("[tokenizer] model file '" + model_path.string() + "' " + p->what + ". " + p->hint);
  }
  std::error_code ec;
  if (!fs::is_regular_file(model_path, ec)) {
    throw DataError("[tokenizer] model file missing: expected a SentencePiece .model, got '" +
                    model_path.string() + "'. Hint: run `lmtrain tokenizer train` first.");
  }
  char* err = nullptr;
  if (bridge().load(model_path.c_str(), &h_->p, &err) != 0) {
    throw DataError("[tokenizer] cannot load '" + model_path.string() + "': " + take_error(err));
  }
  sha256_ = util::sha256_file(model_path);
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  int32_t* ids = nullptr;
  size_t n = 0;
  char* err = nullptr;
  if (bridge().encode(h_->p, text.data(), text.size(), &ids, &n, &err) != 0) {
    throw DataError("[tokenizer] encode failed: " + take_error(err));
  }
  std::vector<int32_t> out(ids, ids + n);
  bridge().free(ids);
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  const int32_t v = vocab_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= v) {
      throw DataError("[tokenizer] decode: expected ids in [0, " + std::to_string(v) + "), got " +
                      std::to_string(id));
    }
  }
  char* text = nullptr;
  size_t len = 0;
  char* err = nullptr;
  if (bridge().decode(h_->p, ids.data(), ids.size(), &text, &len, &err) != 0) {
    throw DataError("[tokenizer] decode failed: " + take_error(err));
  }
  std::string out(text, len);
  bridge().free(text);
  return out;
}

int32_t Tokenizer::vocab_size() const { return bridge().vocab_size(h_->p); }

std::string Tokenizer::piece(int32_t id) const {
  char* s = nullptr;
  if (bridge().id_to_piece(h_->p, id, &s) != 0) {
    throw DataError("[tokenizer] piece: expected id in [0, " + std::to_string(vocab_size()) + "), got " +
                    std::to_string(id));
  }
  std::string out(s);
  bridge().free(s);
  return out;
}

int32_t Tokenizer::piece_to_id(const std::string& piece) const { return bridge().piece_to_id(h_->p, piece.c_str()); }
int32_t Tokenizer::unk_id() const { return bridge().special_id(h_->p, 0); }
int32_t Tokenizer::pad_id() const { return bridge().special_id(h_->p, 3); }

std::vector<int32_t> decoded_bytes_per_id(const Tokenizer& tok) {
  static const std::string kMark = "\xE2\x96\x81";  // U+2581
  std::vector<int32_t> out(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const std::string p = tok.piece(id);
    int32_t bytes = 0;
    if (id == tok.eos_id() || p == "<s>") {
      bytes = 0;
    } else if (id == tok.unk_id() || (p.size() == 6 && p.rfind("<0x", 0) == 0 && p.back() == '>')) {
      bytes = 1;
    } else {
      bytes = static_cast<int32_t>(p.size());
      for (size_t at = p.find(kMark); at != std::string::npos; at = p.find(kMark, at + kMark.size())) bytes -= 2;
    }
    out[static_cast<size_t>(id)] = bytes;
  }
  return out;
}

std::vector<std::string> Tokenizer::unknown_characters(std::string_view text) const {
  std::vector<std::string> out;
  const int32_t unk = unk_id();
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;  // one UTF-8 code point (continuation bytes are 10xxxxxx)
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    const std::string_view ch = text.substr(i, n);
    i += n;
    if (ch == " ") continue;
    const auto ids = encode(ch);
    if (std::find(ids.begin(), ids.end(), unk) != ids.end()) out.emplace_back(ch);
  }
  return out;
}
int32_t Tokenizer::eos_id() const { return bridge().special_id(h_->p, 2); }

}  // namespace lm::tokenizer
