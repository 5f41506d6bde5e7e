#include "export/gguf.h"

#include <fstream>
#include <map>

#include "export/hf.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::exporter {
namespace fs = std::filesystem;
using gguf::KeyValue;

namespace {

// The narrowest rows q8_0 is written for: below it node-llama-cpp 3.21.1's llama.cpp computes a model's
// probabilities far off at q8_0, the file being right by scripts/read_gguf.py (docs/BENCHMARKS.md "GGUF in
// llama.cpp").
constexpr int64_t kQ8MinWidth = 64;

// lmtrain's names -> llama.cpp's (LLM_ARCH_GPT2's tensors), in the file's order; sinusoidal positions are
// written as their table, which gpt2_form_weights names pos_emb.weight.
std::vector<std::pair<std::string, std::string>> gguf_names(const model::GptConfig& a) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : gpt2_names(a)) {
    out.emplace_back(n.lmtrain, n.gguf);
    if (n.lmtrain == "tok_emb.weight" && a.positions == model::Positions::kSinusoidal) {
      out.emplace_back("pos_emb.weight", "position_embd.weight");
    }
  }
  return out;
}

// llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7.
uint32_t file_type(gguf::TensorType t) {
  switch (t) {
    case gguf::TensorType::kF32: return 0;
    case gguf::TensorType::kF16: return 1;
    case gguf::TensorType::kQ8_0: return 7;
  }
  return 0;
}

std::vector<KeyValue> vocabulary(const checkpoint::LoadedCheckpoint& ck, const tokenizer::ModelSpec& spec) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const auto& p : spec.pieces) {
    tokens.push_back(p.piece);
    scores.push_back(p.score);
    types.push_back(static_cast<int32_t>(p.type));  // llama_token_type numbers are SentencePiece's
  }
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  const auto eos = static_cast<uint32_t>(tok.eos_id());
  std::vector<KeyValue> out = {
      {"tokenizer.ggml.model", std::string("llama")},
      {"tokenizer.ggml.pre", std::string("default")},
      {"tokenizer.ggml.tokens", tokens},
      {"tokenizer.ggml.scores", scores},
      {"tokenizer.ggml.token_type", types},
      // lmtrain starts every text with </s> (the end of the line before it): llama.cpp's bos is that id.
      {"tokenizer.ggml.bos_token_id", eos},
      {"tokenizer.ggml.eos_token_id", eos},
      {"tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(tok.unk_id())},
      {"tokenizer.ggml.add_bos_token", true},
      {"tokenizer.ggml.add_eos_token", false},
      {"tokenizer.ggml.add_space_prefix", spec.add_dummy_prefix}};
  if (tok.pad_id() >= 0) out.push_back({"tokenizer.ggml.padding_token_id", static_cast<uint32_t>(tok.pad_id())});
  return out;
}

}  // namespace

std::vector<std::string> tokenizer_warnings(const tokenizer::ModelSpec& spec) {
  std::vector<std::string> out;
  if (!spec.byte_fallback) {
    out.push_back("the tokenizer has no byte pieces: llama.cpp aborts on any character outside its vocabulary, the "
                  "newline included (node-llama-cpp tokenizes one while loading). Hint: train the tokenizer with "
                  "tokenizer.byte_fallback true");
  }
  if (spec.normalization != "identity" || spec.remove_extra_whitespaces) {
    out.push_back("the tokenizer normalises text (" + tokenizer::normalization_name(spec) +
                  (spec.remove_extra_whitespaces ? ", repeated spaces dropped" : "") +
                  ") and llama.cpp does not: text that NFKC changes, or with repeated, leading or trailing spaces, "
                  "can tokenize differently. Hint: tokenizer.normalization identity tokenizes as llama.cpp");
  }
  if (spec.algorithm != "bpe") {
    out.push_back("the tokenizer is " + spec.algorithm + ", and llama.cpp's SentencePiece tokenizer merges pieces by "
                  "score as BPE does: its ids can differ from lmtrain's. Hint: tokenizer.model_type bpe");
  }
  return out;
}

std::vector<KeyValue> gguf_metadata(const checkpoint::LoadedCheckpoint& ck, const tokenizer::ModelSpec& spec,
                                    gguf::TensorType type) {
  const auto& a = ck.arch;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  std::vector<KeyValue> kv = {
      {"general.architecture", std::string("gpt2")},
      {"general.name", "lmtrain " + ck.dir.parent_path().filename().string() + " step " + std::to_string(ck.state.step)},
      {"general.file_type", file_type(type)},
      {"gpt2.context_length", u32(a.max_seq_len)},  // the rows of position_embd
      {"gpt2.embedding_length", u32(a.d_model)},
      {"gpt2.feed_forward_length", u32(a.mlp_ratio * a.d_model)},
      {"gpt2.block_count", u32(a.n_layers)},
      {"gpt2.attention.head_count", u32(a.n_heads)},
      {"gpt2.attention.layer_norm_epsilon", 1e-5f}};
  for (auto& v : vocabulary(ck, spec)) kv.push_back(std::move(v));
  return kv;
}

namespace {

// An existing --out is replaced only when it is an earlier GGUF file; anything else is kept.
void check_gguf_out(const fs::path& out) {
  util::check_output_directory(out, "export", "--out");
  std::error_code ec;
  const auto st = fs::symlink_status(out, ec);
  if (!fs::exists(st)) return;
  auto refuse = [&](const std::string& what) {
    throw ConfigError("[export] --out: expected a new file or an earlier GGUF export to replace, got '" + out.string() +
                      "', " + what + " (kept as it is). Hint: choose another --out.");
  };
  if (fs::is_symlink(st)) refuse("a symbolic link");
  if (!fs::is_regular_file(st)) refuse(fs::is_directory(st) ? "a directory" : "not a regular file");
  std::ifstream in(out, std::ios::binary);
  if (!in) refuse("which cannot be read");
  std::string head(4, '\0');
  if (!in.read(head.data(), 4) || !gguf::has_magic(head)) refuse("which is not a GGUF file");
}

}  // namespace

GgufExport export_gguf(const checkpoint::LoadedCheckpoint& ck, const fs::path& out, gguf::TensorType type) {
  check_gguf_out(out);
  const auto weights = gpt2_form_weights(*ck.model, "gguf", "llama.cpp's gpt2");
  if (type == gguf::TensorType::kQ8_0 && ck.arch.d_model < kQ8MinWidth) {
    throw ConfigError("[export] gguf q8_0: expected d_model >= " + std::to_string(kQ8MinWidth) + ", got " +
                      std::to_string(ck.arch.d_model) + ": llama.cpp's q8_0 products go wrong on rows this short "
                      "(docs/llama-cpp.md \"Types\"). Hint: --type f16.");
  }
  std::vector<gguf::Tensor> tensors;
  for (const auto& [mine, theirs] : gguf_names(ck.arch)) {
    const torch::Tensor& t = weights.at(mine);
    if (!torch::isfinite(t).all().item<bool>()) {
      throw CheckpointError("[export] gguf: expected finite weights, got NaN or Inf in " + mine + " of " +
                            ck.dir.string() + ". Hint: export an earlier checkpoint.");
    }
    tensors.push_back(gguf::make_tensor(theirs, t, t.dim() == 2 ? type : gguf::TensorType::kF32));
  }
  const tokenizer::ModelSpec spec = tokenizer::read_model_spec(ck.tokenizer_model);
  const std::string bytes = gguf::file_bytes(gguf_metadata(ck, spec, type), tensors);
  util::atomic_write_file(out, bytes);
  return {bytes.size(), tensors.size(), tokenizer_warnings(spec)};
}

}  // namespace lm::exporter
