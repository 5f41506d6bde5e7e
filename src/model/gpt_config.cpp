#include "model/gpt_config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <map>
#include <set>
#include <sstream>

#include "util/errors.h"

namespace lm::model {

Positions parse_positions(std::string_view s) {
  if (s == "learned") return Positions::kLearned;
  if (s == "sinusoidal") return Positions::kSinusoidal;
  if (s == "rope") return Positions::kRope;
  throw ConfigError("[model] positions: expected learned | sinusoidal | rope, got '" + std::string(s) + "'");
}

EmbeddingScale parse_embedding_scale(std::string_view s) {
  if (s == "none") return EmbeddingScale::kNone;
  if (s == "sqrt_d") return EmbeddingScale::kSqrtD;
  throw ConfigError("[model] embedding_scale: expected none | sqrt_d, got '" + std::string(s) + "'");
}

MlpActivation parse_mlp_activation(std::string_view s) {
  if (s == "gelu") return MlpActivation::kGelu;
  if (s == "relu2") return MlpActivation::kRelu2;
  throw ConfigError("[model] mlp_activation: expected gelu | relu2, got '" + std::string(s) + "'");
}

std::string to_string(MlpActivation a) { return a == MlpActivation::kGelu ? "gelu" : "relu2"; }
std::string to_string(Positions p) {
  return p == Positions::kLearned ? "learned" : p == Positions::kSinusoidal ? "sinusoidal" : "rope";
}
std::string to_string(EmbeddingScale s) { return s == EmbeddingScale::kNone ? "none" : "sqrt_d"; }

std::vector<std::string> GptConfig::problems() const {
  std::vector<std::string> out;
  auto positive = [&](const char* key, int64_t v) {
    if (v < 1) out.push_back(std::string("model.") + key + ": expected >= 1, got " + std::to_string(v));
  };
  positive("vocab_size", vocab_size);
  positive("d_model", d_model);
  positive("n_layers", n_layers);
  positive("n_heads", n_heads);
  positive("max_seq_len", max_seq_len);
  positive("mlp_ratio", mlp_ratio);
  if (n_heads >= 1 && d_model >= 1 && d_model % n_heads != 0) {
    out.push_back("model.n_heads: expected a divisor of d_model=" + std::to_string(d_model) + ", got " +
                  std::to_string(n_heads));
  }
  if (positions == Positions::kSinusoidal && d_model % 2 != 0) {
    out.push_back("model.d_model: expected an even value for sinusoidal positions, got " +
                  std::to_string(d_model));
  }
  if (positions == Positions::kRope && n_heads >= 1 && d_model % n_heads == 0 && (d_model / n_heads) % 2 != 0) {
    out.push_back("model.n_heads: expected an even head width d_model/n_heads for rope positions, got " +
                  std::to_string(d_model) + "/" + std::to_string(n_heads) + " = " + std::to_string(d_model / n_heads));
  }
  auto number = [](double v) {
    std::ostringstream t;
    t << v;
    return t.str();
  };
  // NaN fails every comparison, so each test is written to reject it too.
  if (!(rope_base > 1.0 && std::isfinite(rope_base))) {
    out.push_back("model.rope_base: expected a finite value > 1, got " + number(rope_base));
  }
  if (!(init_std > 0.0 && std::isfinite(init_std))) {
    out.push_back("model.init_std: expected a finite value > 0, got " + number(init_std));
  }
  if (!(embedding_init_std > 0.0 && std::isfinite(embedding_init_std))) {
    out.push_back("model.embedding_init_std: expected a finite value > 0, got " + number(embedding_init_std));
  }
  if (!(logit_softcap >= 0.0 && std::isfinite(logit_softcap))) {
    out.push_back("model.logit_softcap: expected 0 (off) or a finite value > 0, got " + number(logit_softcap));
  }
  return out;
}

namespace {

// A member added to GptConfig changes its size: add it to visit_fields (gpt_config.h), then update this.
static_assert(sizeof(GptConfig) == 6 * sizeof(int64_t) + 2 * sizeof(int64_t) + 4 * sizeof(double) + 8 + sizeof(double) &&
                  offsetof(GptConfig, mlp_activation) == 6 * sizeof(int64_t) + 12 &&
                  offsetof(GptConfig, logit_softcap) == 6 * sizeof(int64_t) + 2 * sizeof(int64_t) + 4 * sizeof(double) + 8,
              "GptConfig changed: list the new field in visit_fields");

// One field's value in JSON (numbers and booleans as such, enums by name) and as text.
nlohmann::json field_json(int64_t v) { return v; }
nlohmann::json field_json(double v) { return v; }
nlohmann::json field_json(bool v) { return v; }
nlohmann::json field_json(Positions v) { return to_string(v); }
nlohmann::json field_json(EmbeddingScale v) { return to_string(v); }
nlohmann::json field_json(MlpActivation v) { return to_string(v); }
void field_from(const nlohmann::json& j, int64_t& v) { v = j.get<int64_t>(); }
void field_from(const nlohmann::json& j, double& v) { v = j.get<double>(); }
void field_from(const nlohmann::json& j, bool& v) { v = j.get<bool>(); }
void field_from(const nlohmann::json& j, Positions& v) { v = parse_positions(j.get<std::string>()); }
void field_from(const nlohmann::json& j, EmbeddingScale& v) { v = parse_embedding_scale(j.get<std::string>()); }
void field_from(const nlohmann::json& j, MlpActivation& v) { v = parse_mlp_activation(j.get<std::string>()); }
std::string field_text(const nlohmann::json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

}  // namespace

std::vector<std::pair<std::string, std::string>> field_texts(const GptConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  visit_fields(c, [&](const char* key, const auto& v) { out.emplace_back(key, field_text(field_json(v))); });
  return out;
}

std::string describe(const GptConfig& c) {
  static const std::map<std::string, std::string> letter{
      {"vocab_size", "V"}, {"d_model", "C"}, {"n_layers", "L"}, {"n_heads", "H"}, {"max_seq_len", "T"}};
  std::string out;
  for (const auto& [key, text] : field_texts(c)) {
    const auto l = letter.find(key);
    out += (out.empty() ? "" : " ") + (l == letter.end() ? key : l->second) + "=" + text;
  }
  return out;
}

bool GptConfig::operator==(const GptConfig& o) const { return field_texts(*this) == field_texts(o); }

void to_json(nlohmann::json& j, const GptConfig& c) {
  j = nlohmann::json::object();
  visit_fields(c, [&](const char* key, const auto& v) { j[key] = field_json(v); });
}

void from_json(const nlohmann::json& j, GptConfig& c) {
  // Fields added after arch.json's first form: an older file lacks them and meant their default.
  static const std::set<std::string> added_later{"mlp_activation", "rope_base",          "qk_norm",       "bias",
                                                 "init_std",       "embedding_init_std", "zero_init_proj", "logit_softcap"};
  visit_fields(c, [&](const char* key, auto& v) {
    if (!j.contains(key) && added_later.count(key)) return;
    field_from(j.at(key), v);
  });
}

}  // namespace lm::model
