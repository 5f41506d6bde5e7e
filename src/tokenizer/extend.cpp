#include "tokenizer/extend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "tokenizer/bpe.h"
#include "tokenizer/model_spec.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::tokenizer {

namespace fs = std::filesystem;

namespace {

bool mergeable_type(PieceType t) {  // what SentencePiece's BPE may form (its pieces_ map; byte and control pieces aside)
  return t == PieceType::kNormal || t == PieceType::kUserDefined || t == PieceType::kUnused;
}

struct OldVocab {
  ModelSpec spec;
  std::unordered_map<std::string, int32_t> id;       ///< every piece's id
  std::unordered_map<std::string, float> mergeable;  ///< what BPE may form, with its score
  float lowest = 0.0f;                               ///< the lowest score of a mergeable piece
  int32_t unk = 0;
};

OldVocab read_old_vocab(const fs::path& model) {
  OldVocab v;
  v.spec = read_model_spec(model);
  for (size_t i = 0; i < v.spec.pieces.size(); ++i) {
    const auto& p = v.spec.pieces[i];
    v.id.emplace(p.piece, static_cast<int32_t>(i));
    if (p.type == PieceType::kUnknown) v.unk = static_cast<int32_t>(i);
    if (mergeable_type(p.type)) {
      v.mergeable.emplace(p.piece, p.score);
      v.lowest = std::min(v.lowest, p.score);
    }
  }
  return v;
}

// The old ids that the old tokenizer gives `piece`'s text: its BPE symbols, a symbol that is no piece as its
// byte pieces (byte fallback) or <unk>.
std::vector<int32_t> old_split(const OldVocab& v, const std::string& piece) {
  std::vector<int32_t> ids;
  for (const auto& s : bpe_segment(piece, v.mergeable)) {
    if (auto it = v.id.find(s); it != v.id.end() && mergeable_type(v.spec.pieces[it->second].type)) {
      ids.push_back(it->second);
      continue;
    }
    if (!v.spec.byte_fallback) {
      ids.push_back(v.unk);
      continue;
    }
    for (unsigned char b : s) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned>(b));
      ids.push_back(v.id.at(name));
    }
  }
  return ids;
}

// Pieces of a model trained on the new text that the old vocabulary lacks, in that model's score order, with
// the pieces its merges formed on the way to each (`paths`). Grows the model's vocabulary until it gives
// `want` or the text gives no more (SentencePiece's "<= M" names the most a text allows).
std::vector<std::string> candidate_pieces(const OldVocab& old, const CorpusFiles& corpus, const TokenizerConfig& cfg,
                                          int threads, uint64_t seed, const fs::path& scratch, int64_t want,
                                          std::unordered_map<std::string, float>& mergeable) {
  const int32_t meta = 3 + (cfg.byte_fallback ? 256 : 0);
  int64_t size = std::max<int64_t>(2 * want, want + 1024) + meta;
  bool at_most = false;
  for (;;) {
    TokenizerConfig c = cfg;
    c.vocab_size = static_cast<int>(std::min<int64_t>(size, std::numeric_limits<int>::max()));
    try {
      train_tokenizer(corpus, scratch, c, threads, seed);
    } catch (const DataError& e) {
      static const std::regex most(R"(too high[^<]*<= (\d+))");
      std::cmatch m;
      if (at_most || !std::regex_search(e.what(), m, most)) throw;
      size = std::stoll(m[1].str());
      at_most = true;
      continue;
    }
    const ModelSpec s = read_model_spec(scratch);
    std::error_code ec;
    fs::remove(scratch, ec);
    std::vector<std::pair<float, std::string>> found;
    mergeable.clear();
    for (const auto& p : s.pieces) {
      if (!mergeable_type(p.type)) continue;
      mergeable.emplace(p.piece, p.score);
      if (!old.id.count(p.piece)) found.emplace_back(p.score, p.piece);
    }
    std::stable_sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first > b.first; });
    if (static_cast<int64_t>(found.size()) >= want || at_most) {
      std::vector<std::string> out;
      for (auto& f : found) out.push_back(f.second);
      return out;
    }
    size *= 2;
  }
}

// finetune.new_pieces_from: one piece a line; duplicates and pieces the model has are refused.
std::vector<std::string> listed_pieces(const fs::path& list, const OldVocab& old) {
  const std::string text = read_corpus(list, "new pieces list");
  std::vector<std::string> out, problems;
  std::set<std::string> seen;
  size_t line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string p = text.substr(at, nl - at);
    at = nl + 1;
    ++line;
    if (!p.empty() && p.back() == '\r') p.pop_back();
    if (p.empty()) continue;
    const std::string where = "line " + std::to_string(line) + " '" + p + "'";
    if (p.find_first_of(" \t") != std::string::npos) {
      problems.push_back(where + ": a space or tab (a piece writes a word start as U+2581, \xE2\x96\x81)");
    } else if (!seen.insert(p).second) {
      problems.push_back(where + ": listed twice");
    } else if (old.id.count(p)) {
      problems.push_back(where + ": already in the vocabulary (id " + std::to_string(old.id.at(p)) + ")");
    } else {
      out.push_back(p);
    }
  }
  if (!problems.empty()) {
    throw ConfigError(util::problem_list("[finetune] new_pieces_from '" + list.string() + "': expected new, distinct pieces:",
                                         problems, "Hint: remove these lines."));
  }
  if (out.empty()) {
    throw ConfigError("[finetune] new_pieces_from '" + list.string() + "': expected at least one piece, got none. "
                      "Hint: one piece a line, U+2581 (\xE2\x96\x81) marking a word start.");
  }
  return out;
}

// The ids SentencePiece itself gives each new piece's text read verbatim; the pieces that are not one id.
std::vector<std::string> unreachable_by_sentencepiece(const std::string& model_bytes, const fs::path& out_model,
                                                      const std::vector<std::string>& order) {
  struct Probe {  // removed on every exit path
    fs::path path;
    ~Probe() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } probe{out_model.string() + "." + util::temp_suffix() + ".probe"};
  util::atomic_write_file(probe.path, verbatim_model(model_bytes));
  Tokenizer tok(probe.path);
  std::vector<std::string> bad;
  for (const auto& p : order) {
    const auto ids = tok.encode(p);
    if (ids.size() != 1 || tok.piece(ids[0]) != p) bad.push_back(p);
  }
  return bad;
}

nlohmann::json wanted(const fs::path& old_model, const CorpusFiles& corpus, const ExtensionSpec& spec,
                      const TokenizerConfig& cfg, uint64_t seed) {
  nlohmann::json j = {{"extends_sha256", util::sha256_file(old_model)},
                      {"new_pieces", spec.count},
                      {"character_coverage", cfg.character_coverage},
                      {"max_sentences", cfg.max_sentences},
                      {"seed", seed}};
  if (spec.list.empty()) {
    j["text_sha256"] = corpus_sha256(hash_corpus(corpus));
  } else {
    j["new_pieces_from"] = spec.list.string();
    j["list_sha256"] = util::sha256_file(spec.list);
  }
  return j;
}

// The sidecar's extension (its "inputs" name the model extended).
Extension from_json(const nlohmann::json& side) {
  const auto& j = side.at("extension");
  Extension e;
  e.old_vocab = j.at("old_vocab").get<int32_t>();
  e.extends_sha256 = side.at("inputs").at("extends_sha256").get<std::string>();
  for (const auto& p : j.at("pieces")) {
    e.pieces.push_back({p.at("piece").get<std::string>(), p.at("id").get<int32_t>(),
                        p.at("from").get<std::vector<int32_t>>(), p.value("intermediate", false)});
  }
  return e;
}

// The sidecar of `model` when it describes an extension of these very bytes; null otherwise.
nlohmann::json extension_sidecar(const fs::path& model) {
  const fs::path sidecar = model.string() + ".json";
  std::error_code ec;
  if (!fs::is_regular_file(sidecar, ec) || !fs::is_regular_file(model, ec)) return nullptr;
  auto j = nlohmann::json::parse(util::read_file(sidecar, "tokenizer sidecar"));
  if (!j.is_object() || !j.contains("extension") || j.value("model_sha256", "") != util::sha256_file(model)) return nullptr;
  return j;
}

}  // namespace

Extension read_extension(const fs::path& model) {
  try {
    const auto j = extension_sidecar(model);
    return j.is_null() ? Extension{} : from_json(j);
  } catch (const nlohmann::json::exception& e) {
    throw DataError("[tokenizer] '" + model.string() + ".json': expected the JSON lmtrain wrote beside the model, got " +
                    e.what() + ". Hint: delete it and run again.");
  }
}

bool extension_is_current(const fs::path& model, const fs::path& old_model, const CorpusFiles& corpus,
                          const ExtensionSpec& spec, const TokenizerConfig& cfg, uint64_t seed) {
  try {
    const auto j = extension_sidecar(model);
    return !j.is_null() && j.value("inputs", nlohmann::json()) == wanted(old_model, corpus, spec, cfg, seed);
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

void forget_extension(const fs::path& model) {
  const fs::path sidecar = model.string() + ".json";
  std::error_code ec;
  if (!fs::is_regular_file(sidecar, ec)) return;
  try {
    if (!nlohmann::json::parse(util::read_file(sidecar, "tokenizer sidecar")).contains("extension")) return;
  } catch (const nlohmann::json::exception&) {
    return;  // not lmtrain's: left alone
  }
  fs::remove(sidecar, ec);
}

std::pair<Extension, bool> ensure_extended_tokenizer(const fs::path& old_model, const CorpusFiles& corpus,
                                                     const ExtensionSpec& spec, const TokenizerConfig& cfg, int threads,
                                                     uint64_t seed, const fs::path& out_model) {
  const nlohmann::json want = wanted(old_model, corpus, spec, cfg, seed);  // hashes the text once
  try {
    if (const auto had = extension_sidecar(out_model); !had.is_null() && had.value("inputs", nlohmann::json()) == want) {
      return {from_json(had), false};
    }
  } catch (const nlohmann::json::exception&) {
    // unreadable: made again
  }
  const fs::path sidecar = out_model.string() + ".json";
  const OldVocab old = read_old_vocab(old_model);
  if (old.spec.algorithm != "bpe") {
    throw ConfigError("[finetune] new_pieces: expected a checkpoint whose tokenizer is BPE, got " + old.spec.algorithm +
                      " (its pieces are scored as probabilities, and appended ones would change how old text "
                      "splits). Hint: fine-tune without finetune.new_pieces, or start from a BPE checkpoint.");
  }
  std::set<std::string> intermediate;
  std::vector<std::string> order;
  if (!spec.list.empty()) {
    order = listed_pieces(spec.list, old);
  } else {
    std::unordered_map<std::string, float> mergeable;
    const auto found = candidate_pieces(old, corpus, cfg, threads, seed, out_model.string() + ".candidates.model",
                                        spec.count, mergeable);
    if (found.empty()) {
      throw ConfigError("[finetune] new_pieces: the new text adds no piece that the vocabulary lacks (" +
                        describe_files(corpus) + "). Hint: drop finetune.new_pieces.");
    }
    if (static_cast<int64_t>(found.size()) < spec.count) {
      throw ConfigError("[finetune] new_pieces: expected at most " + std::to_string(found.size()) +
                        " (the pieces a tokenizer trained on " + describe_files(corpus) +
                        " has that the vocabulary lacks), got " + std::to_string(spec.count) +
                        ". Hint: --new-pieces " + std::to_string(found.size()) + " or fewer.");
    }
    order = with_merge_paths(found, old.id, mergeable, spec.count, intermediate);
  }
  const auto stuck = make_reachable(order, old.mergeable, old.lowest, old.id, intermediate);
  if (!stuck.empty()) {
    throw Error(ExitCode::kInternal, "[tokenizer] extension: expected every appended piece to be reachable by BPE "
                                     "merges, got " + std::to_string(stuck.size()) + " that are not (first '" +
                                     stuck.front() + "')");
  }
  const std::string old_bytes = util::read_file(old_model, "tokenizer model");
  const int32_t old_vocab = static_cast<int32_t>(old.spec.pieces.size());
  std::vector<float> scores;  // below every old piece, in the order chosen
  for (size_t i = 0; i < order.size(); ++i) scores.push_back(old.lowest - 1.0f - static_cast<float>(i));
  const std::string bytes = append_pieces(old_bytes, order, scores, old_vocab + static_cast<int32_t>(order.size()));
  if (const auto bad = unreachable_by_sentencepiece(bytes, out_model, order); !bad.empty()) {
    if (!spec.list.empty()) {  // a listed piece the tokenizer's normalisation rewrites
      throw ConfigError("[finetune] new_pieces_from '" + spec.list.string() + "': expected pieces the tokenizer reads "
                        "as written, got " + std::to_string(bad.size()) + " its normalisation changes (first '" +
                        bad.front() + "'). Hint: write them as `lmtrain tokenizer encode --pieces` prints text.");
    }
    throw Error(ExitCode::kInternal, "[tokenizer] extension: expected SentencePiece to encode every appended piece "
                                     "to itself, got " + std::to_string(bad.size()) + " it does not (first '" +
                                     bad.front() + "')");
  }
  Extension e;
  e.old_vocab = old_vocab;
  e.extends_sha256 = want.at("extends_sha256").get<std::string>();
  nlohmann::json pieces = nlohmann::json::array();
  for (size_t i = 0; i < order.size(); ++i) {
    NewPiece p{order[i], old_vocab + static_cast<int32_t>(i), old_split(old, order[i]), intermediate.count(order[i]) > 0};
    pieces.push_back({{"piece", p.piece}, {"id", p.id}, {"from", p.from}, {"intermediate", p.intermediate}});
    e.pieces.push_back(std::move(p));
  }
  util::atomic_write_file(out_model, bytes);
  const nlohmann::json side = {{"inputs", want},
                               {"model_sha256", util::sha256_hex(bytes)},
                               {"extension", {{"old_vocab", old_vocab}, {"pieces", pieces}}}};
  util::atomic_write_file(sidecar, side.dump(1) + "\n");
  return {e, true};
}

}  // namespace lm::tokenizer
