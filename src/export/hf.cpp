#include "export/hf.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "checkpoint/safetensors.h"
#include "checkpoint/tensor_files.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::exporter {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<std::pair<std::string, torch::Tensor>> gpt2_tensors(const model::GptImpl& m) {
  const auto& a = m.config();
  const bool scaled = a.embedding_scale == model::EmbeddingScale::kSqrtD;
  if (scaled && a.tie_embeddings) {
    throw ConfigError("[export] hf: expected a model GPT-2 can express, got embedding_scale sqrt_d with a tied head: "
                      "GPT-2 embeds with wte and reads logits through the same wte, so no one table gives both "
                      "x sqrt(C) rows and unscaled logits. Hint: export --format safetensors keeps lmtrain's form.");
  }
  torch::NoGradGuard no_grad;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  auto put = [&](const std::string& name, const torch::Tensor& t) { out.emplace_back(name, t.detach().cpu().contiguous()); };
  auto& self = const_cast<model::GptImpl&>(m);  // pos_emb->forward and ModuleList::operator[] are not const; both only read
  put("transformer.wte.weight", scaled ? m.tok_emb->weight * std::sqrt(static_cast<double>(a.d_model)) : m.tok_emb->weight);
  put("transformer.wpe.weight", self.pos_emb->forward(a.max_seq_len, 0));  // (T,C): learned rows or the sin/cos table
  for (size_t i = 0; i < self.blocks->size(); ++i) {
    const auto& b = *self.blocks[i]->as<model::BlockImpl>();
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    put(h + "ln_1.weight", b.ln1->weight);
    put(h + "ln_1.bias", b.ln1->bias);
    put(h + "attn.c_attn.weight", b.attn->qkv->weight.t());  // Conv1D: (C, 3C)
    put(h + "attn.c_attn.bias", b.attn->qkv->bias);
    put(h + "attn.c_proj.weight", b.attn->proj->weight.t());
    put(h + "attn.c_proj.bias", b.attn->proj->bias);
    put(h + "ln_2.weight", b.ln2->weight);
    put(h + "ln_2.bias", b.ln2->bias);
    put(h + "mlp.c_fc.weight", b.mlp->fc->weight.t());  // (C, rC)
    put(h + "mlp.c_fc.bias", b.mlp->fc->bias);
    put(h + "mlp.c_proj.weight", b.mlp->proj->weight.t());  // (rC, C)
    put(h + "mlp.c_proj.bias", b.mlp->proj->bias);
  }
  put("transformer.ln_f.weight", m.ln_f->weight);
  put("transformer.ln_f.bias", m.ln_f->bias);
  if (!a.tie_embeddings) put("lm_head.weight", m.head->weight);
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
