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
  std::vector<Gpt2Name> out = {{"transformer.wte.weight", "tok_emb.weight", false, "token_embd.weight"}};
  if (a.positions == model::Positions::kLearned) {
    out.push_back({"transformer.wpe.weight", "pos_emb.weight", false, "position_embd.weight"});
  }
  for (int64_t i = 0; i < a.n_layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".",
                      g = "blk." + std::to_string(i) + ".";
    for (const auto& [hf, lm, t, gg] : std::vector<Gpt2Name>{{"ln_1.weight", "ln1.weight", false, "attn_norm.weight"},
                                                             {"ln_1.bias", "ln1.bias", false, "attn_norm.bias"},
                                                             {"attn.c_attn.weight", "attn.qkv.weight", true, "attn_qkv.weight"},  // Conv1D (C, 3C)
                                                             {"attn.c_attn.bias", "attn.qkv.bias", false, "attn_qkv.bias"},
                                                             {"attn.c_proj.weight", "attn.proj.weight", true, "attn_output.weight"},
                                                             {"attn.c_proj.bias", "attn.proj.bias", false, "attn_output.bias"},
                                                             {"ln_2.weight", "ln2.weight", false, "ffn_norm.weight"},
                                                             {"ln_2.bias", "ln2.bias", false, "ffn_norm.bias"},
                                                             {"mlp.c_fc.weight", "mlp.fc.weight", true, "ffn_up.weight"},  // (C, rC)
                                                             {"mlp.c_fc.bias", "mlp.fc.bias", false, "ffn_up.bias"},
                                                             {"mlp.c_proj.weight", "mlp.proj.weight", true, "ffn_down.weight"},  // (rC, C)
                                                             {"mlp.c_proj.bias", "mlp.proj.bias", false, "ffn_down.bias"}}) {
      out.push_back({h + hf, b + lm, t, g + gg});
    }
  }
  out.push_back({"transformer.ln_f.weight", "ln_f.weight", false, "output_norm.weight"});
  out.push_back({"transformer.ln_f.bias", "ln_f.bias", false, "output_norm.bias"});
  if (!a.tie_embeddings) out.push_back({"lm_head.weight", "head.weight", false, "output.weight"});
  return out;
}

namespace {

// Refuses, naming the option, what neither GPT-2 nor GPT-NeoX computes as lmtrain does; `format` names the
// export ("hf", "gguf"), `family` the target the positions chose ("GPT-2" for added positions, "GPT-NeoX"
// for rope, "llama.cpp's gpt2").
void refuse_inexpressible(const model::GptConfig& a, const std::string& format, const std::string& family) {
  auto refuse = [&](const std::string& what) {
    throw ConfigError("[export] " + format + ": expected a model " + family + " can express, got " + what +
                      ". Hint: export --format safetensors keeps lmtrain's form.");
  };
  if (a.mlp_activation != model::MlpActivation::kGelu) {
    refuse("mlp_activation " + model::to_string(a.mlp_activation) + ": " + family + "'s MLP is the GELU");
  }
  if (a.qk_norm) refuse("qk_norm true: " + family + "'s attention scores q and k as they come");
  if (!a.bias) refuse("bias false: " + family + "'s linear layers have biases");
  if (a.logit_softcap > 0.0) refuse("a logit_softcap: " + family + "'s logits are not capped");
  if (a.embedding_scale == model::EmbeddingScale::kSqrtD && a.tie_embeddings) {
    refuse("embedding_scale sqrt_d with a tied head: " + family + " embeds and reads logits through the same "
           "table, so no one table gives both x sqrt(C) rows and unscaled logits");
  }
}

// The model's weights on the CPU by lmtrain name, the sqrt(C) scale folded into an untied model's table.
std::map<std::string, torch::Tensor> weights_for_export(const model::GptImpl& m) {
  const auto& a = m.config();
  std::map<std::string, torch::Tensor> mine;
  for (auto& [name, t] : model::named_weights(m)) mine[name] = t.detach().cpu();
  if (a.embedding_scale == model::EmbeddingScale::kSqrtD) {
    mine["tok_emb.weight"] = mine["tok_emb.weight"] * std::sqrt(static_cast<double>(a.d_model));
  }
  return mine;
}

}  // namespace

std::map<std::string, torch::Tensor> gpt2_form_weights(const model::GptImpl& m, const std::string& format,
                                                       const std::string& family) {
  const auto& a = m.config();
  if (a.positions == model::Positions::kRope) {
    throw ConfigError("[export] " + format + ": expected a model " + family + " can express, got positions rope: " +
                      family + " adds a position table. Hint: export --format hf writes GPT-NeoX for rope models.");
  }
  refuse_inexpressible(a, format, family);
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> mine = weights_for_export(m);
  if (a.positions == model::Positions::kSinusoidal) {  // exact as a table of max_seq_len rows
    auto& self = const_cast<model::GptImpl&>(m);         // pos_emb->forward is not const; it only reads
    mine["pos_emb.weight"] = self.pos_emb->forward(a.max_seq_len, 0).detach().cpu().contiguous();
  }
  return mine;
}

std::vector<std::pair<std::string, torch::Tensor>> gpt2_tensors(const model::GptImpl& m) {
  const auto& a = m.config();
  std::map<std::string, torch::Tensor> mine = gpt2_form_weights(m, "hf", "GPT-2");
  std::vector<std::pair<std::string, torch::Tensor>> out;
  if (a.positions == model::Positions::kSinusoidal) out.emplace_back("transformer.wpe.weight", mine.at("pos_emb.weight"));
  for (const auto& n : gpt2_names(a)) {
    const auto& t = mine.at(n.lmtrain);
    out.emplace_back(n.gpt2, (n.transpose ? t.t() : t).contiguous());
  }
  return out;
}

namespace {

constexpr const char* kNeox = "GPTNeoXForCausalLM";

// config.json's text: `c` plus the keys both families share (tied head, eos as bos and eos, fp32, cache).
std::string with_common_keys(json c, const model::GptConfig& a, int32_t eos_id) {
  c["tie_word_embeddings"] = a.tie_embeddings;
  c["bos_token_id"] = eos_id;
  c["eos_token_id"] = eos_id;
  c["torch_dtype"] = "float32";
  c["use_cache"] = true;
  return c.dump(2) + "\n";
}

}  // namespace

std::string hf_class(const model::GptConfig& a) {
  return a.positions == model::Positions::kRope ? kNeox : "GPT2LMHeadModel";
}

std::vector<std::pair<std::string, torch::Tensor>> neox_tensors(const model::GptImpl& m) {
  const auto& a = m.config();
  refuse_inexpressible(a, "hf", "GPT-NeoX");
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> mine = weights_for_export(m);
  const int64_t C = a.d_model, H = a.n_heads, D = C / H;
  // lmtrain's qkv rows are [q | k | v], each head by head: (3, H, D); NeoX's are head by head, each [q | k | v]: (H, 3, D).
  auto per_head = [&](const torch::Tensor& t) {  // (3C, ...) -> (3, H, D, ...) -> (H, 3, D, ...) -> (3C, ...)
    std::vector<int64_t> sizes = {3, H, D};
    for (int64_t d = 1; d < t.dim(); ++d) sizes.push_back(t.size(d));
    return t.reshape(sizes).transpose(0, 1).reshape(t.sizes()).contiguous();
  };
  std::vector<std::pair<std::string, torch::Tensor>> out = {{"gpt_neox.embed_in.weight", mine.at("tok_emb.weight")}};
  for (int64_t i = 0; i < a.n_layers; ++i) {
    const std::string n = "gpt_neox.layers." + std::to_string(i) + ".", b = "blocks." + std::to_string(i) + ".";
    for (const auto& [neox, lm] : std::vector<std::pair<std::string, std::string>>{
             {"input_layernorm.weight", "ln1.weight"}, {"input_layernorm.bias", "ln1.bias"},
             {"post_attention_layernorm.weight", "ln2.weight"}, {"post_attention_layernorm.bias", "ln2.bias"}}) {
      out.emplace_back(n + neox, mine.at(b + lm));
    }
    out.emplace_back(n + "attention.query_key_value.weight", per_head(mine.at(b + "attn.qkv.weight")));
    out.emplace_back(n + "attention.query_key_value.bias", per_head(mine.at(b + "attn.qkv.bias")));
    for (const auto& [neox, lm] : std::vector<std::pair<std::string, std::string>>{
             {"attention.dense.weight", "attn.proj.weight"}, {"attention.dense.bias", "attn.proj.bias"},
             {"mlp.dense_h_to_4h.weight", "mlp.fc.weight"}, {"mlp.dense_h_to_4h.bias", "mlp.fc.bias"},
             {"mlp.dense_4h_to_h.weight", "mlp.proj.weight"}, {"mlp.dense_4h_to_h.bias", "mlp.proj.bias"}}) {
      out.emplace_back(n + neox, mine.at(b + lm));
    }
  }
  out.emplace_back("gpt_neox.final_layer_norm.weight", mine.at("ln_f.weight"));
  out.emplace_back("gpt_neox.final_layer_norm.bias", mine.at("ln_f.bias"));
  if (!a.tie_embeddings) out.emplace_back("embed_out.weight", mine.at("head.weight"));
  return out;
}

std::string neox_config_json(const model::GptConfig& a, int32_t eos_id) {
  json c = {{"architectures", {kNeox}},
            {"model_type", "gpt_neox"},
            {"vocab_size", a.vocab_size},
            {"max_position_embeddings", a.max_seq_len},
            {"hidden_size", a.d_model},
            {"num_hidden_layers", a.n_layers},
            {"num_attention_heads", a.n_heads},
            {"intermediate_size", a.mlp_ratio * a.d_model},
            {"hidden_act", "gelu"},  // erf GELU, as lmtrain
            {"rotary_pct", 1.0},
            {"rotary_emb_base", a.rope_base},
            {"use_parallel_residual", false},
            {"layer_norm_eps", 1e-5},
            {"attention_bias", true},
            {"attention_dropout", 0.0},
            {"hidden_dropout", 0.0},
            {"initializer_range", a.init_std}};
  return with_common_keys(c, a, eos_id);
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
            {"scale_attn_weights", true}};
  return with_common_keys(c, a, eos_id);
}

std::vector<std::string> export_hf(const checkpoint::LoadedCheckpoint& ck, const fs::path& out) {
  // --out is a directory: an existing file (or anything else but a directory, or a link to one) is kept and refused.
  std::error_code sec;
  const auto status = fs::status(out, sec);  // a link to a directory is a directory
  if (fs::exists(status) && !fs::is_directory(status)) {
    throw ConfigError("[export] --out: expected a directory for --format hf, got '" + out.string() + "', " +
                      (fs::is_regular_file(status) ? "an existing file" : "not a directory") +
                      " (kept as it is). Hint: choose a directory name, e.g. " + out.stem().string() + "-hf/");
  }
  // GPT-2 for added positions, GPT-NeoX for rope; each refuses what it cannot express before anything is written.
  const bool neox = hf_class(ck.arch) == kNeox;
  checkpoint::SafeTensors st;
  st.tensors = neox ? neox_tensors(*ck.model) : gpt2_tensors(*ck.model);
  st.metadata = {{"format", "pt"}};
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  const int32_t eos = tok.eos_id();
  json tokenizer_config = {{"tokenizer_class", "LlamaTokenizer"}, {"add_bos_token", false}, {"add_eos_token", false},
                           {"legacy", true}, {"model_max_length", ck.arch.max_seq_len},
                           {"unk_token", tok.piece(tok.unk_id())}, {"eos_token", tok.piece(eos)}};
  json generation = {{"bos_token_id", eos}, {"eos_token_id", eos}};
  const std::vector<std::pair<std::string, std::string>> files = {
      {"config.json", neox ? neox_config_json(ck.arch, eos) : gpt2_config_json(ck.arch, eos)},
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
