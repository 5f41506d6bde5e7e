#include "export/hf.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

#include "checkpoint/safetensors.h"
#include "checkpoint/tensor_files.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::exporter {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<Gpt2Name> gpt2_names(const model::GptConfig& a) {
  std::vector<Gpt2Name> out = {{"transformer.wte.weight", "tok_emb.weight", false}};
  if (a.positions == model::Positions::kLearned) out.push_back({"transformer.wpe.weight", "pos_emb.weight", false});
  for (int64_t i = 0; i < a.n_layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".";
    for (const auto& [g, l, t] : std::vector<Gpt2Name>{{"ln_1.weight", "ln1.weight", false},
                                                       {"ln_1.bias", "ln1.bias", false},
                                                       {"attn.c_attn.weight", "attn.qkv.weight", true},  // Conv1D (C, 3C)
                                                       {"attn.c_attn.bias", "attn.qkv.bias", false},
                                                       {"attn.c_proj.weight", "attn.proj.weight", true},
                                                       {"attn.c_proj.bias", "attn.proj.bias", false},
                                                       {"ln_2.weight", "ln2.weight", false},
                                                       {"ln_2.bias", "ln2.bias", false},
                                                       {"mlp.c_fc.weight", "mlp.fc.weight", true},  // (C, rC)
                                                       {"mlp.c_fc.bias", "mlp.fc.bias", false},
                                                       {"mlp.c_proj.weight", "mlp.proj.weight", true},  // (rC, C)
                                                       {"mlp.c_proj.bias", "mlp.proj.bias", false}}) {
      out.push_back({h + g, b + l, t});
    }
  }
  out.push_back({"transformer.ln_f.weight", "ln_f.weight", false});
  out.push_back({"transformer.ln_f.bias", "ln_f.bias", false});
  if (!a.tie_embeddings) out.push_back({"lm_head.weight", "head.weight", false});
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> gpt2_tensors(const model::GptImpl& m) {
  const auto& a = m.config();
  const bool scaled = a.embedding_scale == model::EmbeddingScale::kSqrtD;
  if (a.mlp_activation != model::MlpActivation::kGelu) {
    throw ConfigError("[export] hf: expected a model GPT-2 can express, got mlp_activation " +
                      model::to_string(a.mlp_activation) + ": GPT-2's MLP is the GELU. Hint: export --format "
                      "safetensors keeps lmtrain's form.");
  }
  if (scaled && a.tie_embeddings) {
    throw ConfigError("[export] hf: expected a model GPT-2 can express, got embedding_scale sqrt_d with a tied head: "
                      "GPT-2 embeds with wte and reads logits through the same wte, so no one table gives both "
                      "x sqrt(C) rows and unscaled logits. Hint: export --format safetensors keeps lmtrain's form.");
  }
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> mine;
  for (auto& [name, t] : model::named_weights(m)) mine[name] = t.detach().cpu();
  if (scaled) mine["tok_emb.weight"] = mine["tok_emb.weight"] * std::sqrt(static_cast<double>(a.d_model));
  std::vector<std::pair<std::string, torch::Tensor>> out;
  if (a.positions == model::Positions::kSinusoidal) {  // exact as a table of max_seq_len rows
    auto& self = const_cast<model::GptImpl&>(m);         // pos_emb->forward is not const; it only reads
    out.emplace_back("transformer.wpe.weight", self.pos_emb->forward(a.max_seq_len, 0).detach().cpu().contiguous());
  }
  for (const auto& n : gpt2_names(a)) {
    const auto& t = mine.at(n.lmtrain);
    out.emplace_back(n.gpt2, (n.transpose ? t.t() : t).contiguous());
  }
  return out;
}

std::string gpt2_config_json(const model::GptConfig& a, int32_t eos_id) {
  json c = {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", a.vocab_size},
            {"n_positions", a.max_seq_len},
            {"n_ctx", a.max_seq_len},
            {"n_embd", a.d_model},
            {"n_layer", a.n_layers},
            {"n_head", a.n_heads},
            {"n_inner", a.mlp_ratio * a.d_model},
            {"activation_function", "gelu"},  // erf GELU, as lmtrain (not gelu_new)
            {"layer_norm_epsilon", 1e-5},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"initializer_range", 0.02},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", a.tie_embeddings},
            {"bos_token_id", eos_id},
            {"eos_token_id", eos_id},
            {"torch_dtype", "float32"},
            {"use_cache", true}};
  return c.dump(2) + "\n";
}

std::vector<std::string> export_hf(const checkpoint::LoadedCheckpoint& ck, const fs::path& out) {
  checkpoint::SafeTensors st;
  st.tensors = gpt2_tensors(*ck.model);  // refuses what GPT-2 cannot express before anything is written
  st.metadata = {{"format", "pt"}};
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  const int32_t eos = tok.eos_id();
  json tokenizer_config = {{"tokenizer_class", "LlamaTokenizer"}, {"add_bos_token", false}, {"add_eos_token", false},
                           {"legacy", true}, {"model_max_length", ck.arch.max_seq_len},
                           {"unk_token", tok.piece(tok.unk_id())}, {"eos_token", tok.piece(eos)}};
  json generation = {{"bos_token_id", eos}, {"eos_token_id", eos}};
  const std::vector<std::pair<std::string, std::string>> files = {
      {"config.json", gpt2_config_json(ck.arch, eos)},
      {"generation_config.json", generation.dump(2) + "\n"},
      {"model.safetensors", checkpoint::safetensors_bytes(st)},
      {"tokenizer.model", util::read_file(ck.tokenizer_model, "checkpoint tokenizer")},
      {"tokenizer_config.json", tokenizer_config.dump(2) + "\n"}};
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw SaveError("[export] cannot create '" + out.string() + "': " + ec.message());
  std::vector<std::string> names;
  for (const auto& [name, bytes] : files) {
    util::atomic_write_file(out / name, bytes);
    names.push_back(name);
  }
  return names;
}

void export_safetensors(const checkpoint::LoadedCheckpoint& ck, const fs::path& file) {
  util::atomic_write_file(file, checkpoint::weights_bytes(*ck.model));
}

}  // namespace lm::exporter
