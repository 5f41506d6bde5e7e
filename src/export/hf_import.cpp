#include "export/hf_import.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

#include "checkpoint/safetensors.h"
#include "checkpoint/tensor_files.h"
#include "export/hf.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::exporter {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void refuse(const fs::path& dir, const std::string& what) {
  throw CheckpointError("[import] " + dir.string() + ": " + what);
}

// GPT-2's architecture in lmtrain's terms, refusing what lmtrain would compute differently.
model::GptConfig arch_of(const fs::path& dir) {
  json c;
  try {
    c = json::parse(util::read_file(dir / "config.json", "config.json"));
  } catch (const json::exception& e) {
    refuse(dir, std::string("config.json is not valid JSON: ") + e.what());
  } catch (const DataError& e) {
    refuse(dir, e.what());
  }
  try {
    if (!c.contains("model_type") || c.at("model_type") != "gpt2") refuse(dir, "expected model_type gpt2");
    const std::string act = c.value("activation_function", std::string("gelu_new"));
    if (act != "gelu") {
      refuse(dir, "expected activation_function \"gelu\" (the erf GELU lmtrain computes), got \"" + act +
                      "\": its probabilities would differ");
    }
    if (std::abs(c.value("layer_norm_epsilon", 1e-5) - 1e-5) > 1e-12) refuse(dir, "expected layer_norm_epsilon 1e-5");
    if (!c.value("scale_attn_weights", true) || c.value("scale_attn_by_inverse_layer_idx", false)) {
      refuse(dir, "expected attention scaled by 1/sqrt(head dim) only (scale_attn_weights true, "
                  "scale_attn_by_inverse_layer_idx false), as lmtrain computes it");
    }
    model::GptConfig a;
    a.vocab_size = c.at("vocab_size").get<int64_t>();
    a.d_model = c.at("n_embd").get<int64_t>();
    a.n_layers = c.at("n_layer").get<int64_t>();
    a.n_heads = c.at("n_head").get<int64_t>();
    a.max_seq_len = c.at("n_positions").get<int64_t>();
    const int64_t inner = c.contains("n_inner") && !c.at("n_inner").is_null() ? c.at("n_inner").get<int64_t>() : 4 * a.d_model;
    if (a.d_model <= 0 || inner % a.d_model != 0) refuse(dir, "expected n_inner a multiple of n_embd, got " + std::to_string(inner));
    a.mlp_ratio = inner / a.d_model;
    a.positions = model::Positions::kLearned;
    a.tie_embeddings = c.value("tie_word_embeddings", true);
    a.embedding_scale = model::EmbeddingScale::kNone;
    if (auto p = a.problems(); !p.empty()) refuse(dir, "unusable architecture: " + p.front());
    return a;
  } catch (const json::exception& e) {
    refuse(dir, std::string("config.json: ") + e.what());
  }
}

}  // namespace

ImportedModel import_hf(const fs::path& dir) {
  ImportedModel out;
  out.arch = arch_of(dir);
  out.tokenizer_model = dir / "tokenizer.model";
  if (!fs::is_regular_file(out.tokenizer_model)) refuse(dir, "expected a SentencePiece tokenizer.model beside the weights");
  std::map<std::string, torch::Tensor> stored;
  for (auto& [name, t] : checkpoint::read_safetensors(dir / "model.safetensors").tensors) {
    stored[name.rfind("transformer.", 0) == 0 ? name : "transformer." + name] = t;  // original GPT-2 files lack the prefix
  }
  if (stored.count("transformer.lm_head.weight")) stored["lm_head.weight"] = stored["transformer.lm_head.weight"];
  std::map<std::string, torch::Tensor> mine;  // lmtrain's names and orientation
  for (const auto& n : gpt2_names(out.arch)) {
    auto it = stored.find(n.gpt2);
    if (it == stored.end()) refuse(dir, "tensor missing: expected " + n.gpt2 + " in model.safetensors");
    if (n.transpose && it->second.dim() != 2) {
      refuse(dir, n.gpt2 + ": expected a Conv1D matrix, got " + std::to_string(it->second.dim()) + " dimensions");
    }
    mine[n.lmtrain] = n.transpose ? it->second.t() : it->second;
  }
  out.model = model::Gpt(out.arch);
  checkpoint::copy_weights(*out.model, mine, (dir / "model.safetensors").string());
  return out;
}

}  // namespace lm::exporter
