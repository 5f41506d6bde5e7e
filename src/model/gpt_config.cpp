#include "model/gpt_config.h"

#include <nlohmann/json.hpp>

#include "util/errors.h"

namespace lm::model {

Positions parse_positions(std::string_view s) {
  if (s == "learned") return Positions::kLearned;
  if (s == "sinusoidal") return Positions::kSinusoidal;
  throw ConfigError("[model] positions: expected learned | sinusoidal, got '" + std::string(s) + "'");
}

EmbeddingScale parse_embedding_scale(std::string_view s) {
  if (s == "none") return EmbeddingScale::kNone;
  if (s == "sqrt_d") return EmbeddingScale::kSqrtD;
  throw ConfigError("[model] embedding_scale: expected none | sqrt_d, got '" + std::string(s) + "'");
}

std::string to_string(Positions p) { return p == Positions::kLearned ? "learned" : "sinusoidal"; }
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
  return out;
}

bool GptConfig::operator==(const GptConfig& o) const {
  return vocab_size == o.vocab_size && d_model == o.d_model && n_layers == o.n_layers &&
         n_heads == o.n_heads && max_seq_len == o.max_seq_len && mlp_ratio == o.mlp_ratio &&
         positions == o.positions && tie_embeddings == o.tie_embeddings && embedding_scale == o.embedding_scale;
}

void to_json(nlohmann::json& j, const GptConfig& c) {
  j = nlohmann::json{{"vocab_size", c.vocab_size},   {"d_model", c.d_model},
                     {"n_layers", c.n_layers},       {"n_heads", c.n_heads},
                     {"max_seq_len", c.max_seq_len}, {"mlp_ratio", c.mlp_ratio},
                     {"positions", to_string(c.positions)}, {"tie_embeddings", c.tie_embeddings},
                     {"embedding_scale", to_string(c.embedding_scale)}};
}

void from_json(const nlohmann::json& j, GptConfig& c) {
  c.vocab_size = j.at("vocab_size").get<int64_t>();
  c.d_model = j.at("d_model").get<int64_t>();
  c.n_layers = j.at("n_layers").get<int64_t>();
  c.n_heads = j.at("n_heads").get<int64_t>();
  c.max_seq_len = j.at("max_seq_len").get<int64_t>();
  c.mlp_ratio = j.at("mlp_ratio").get<int64_t>();
  c.positions = parse_positions(j.at("positions").get<std::string>());
  c.tie_embeddings = j.at("tie_embeddings").get<bool>();
  c.embedding_scale = parse_embedding_scale(j.at("embedding_scale").get<std::string>());
}

}  // namespace lm::model
