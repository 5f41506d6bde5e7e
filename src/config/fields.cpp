#include "config/fields.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "util/errors.h"

namespace lm::config {
namespace {

// The shortest decimal that reads back as exactly `x`.
std::string shortest(double x) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_unsigned_v<T>) return "a non-negative integer";
  else return "an integer";
}


// Numeric or boolean field with an inclusive range.
template <typename T>
Field scalar(std::string key, std::string help, std::function<T&(RunConfig&)> ref,
             T lo = std::numeric_limits<T>::lowest(), T hi = std::numeric_limits<T>::max()) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref, lo, hi](RunConfig& c, const YAML::Node& n, const std::string& where,
                             std::vector<std::string>& errs) {
    T v{};
    try {
      if (!n.IsScalar()) throw YAML::Exception(n.Mark(), "not a scalar");
      // yaml-cpp reads "-1" as a huge unsigned and "1.5" as int 1 in some versions: parse via long double.
      if constexpr (std::is_same_v<T, bool>) {
        v = n.as<bool>();
      } else {
        std::string s = n.Scalar();
        size_t used = 0;
        long double x = std::stold(s, &used);
        if (used != s.size() || !std::isfinite(x)) throw std::invalid_argument(s);
        if (x < static_cast<long double>(lo) || x > static_cast<long double>(hi)) {
          errs.push_back(key + where + ": expected a value in [" + show(lo) + ", " + show(hi) + "], got " + s);
          return;
        }
        if constexpr (std::is_integral_v<T>) {
          if (x != std::floor(x)) throw std::invalid_argument(s);  // in range, so the cast below is defined
        }
        v = static_cast<T>(x);
      }
    } catch (const std::exception&) {
      errs.push_back(key + where + ": expected " + type_name<T>() + ", got '" + (n.IsScalar() ? n.Scalar() : "a " + std::string(n.IsMap() ? "map" : "list")) + "'");
      return;
    }
    ref(c) = v;
  };
  f.emit = [ref](const RunConfig& c, YAML::Emitter& e) {
    if constexpr (std::is_same_v<T, bool>) {
      e << (ref(const_cast<RunConfig&>(c)) ? "true" : "false");
    } else if constexpr (std::is_floating_point_v<T>) {
      e << shortest(ref(const_cast<RunConfig&>(c)));  // 0.003, not 0.0030000000000000001
    } else {
      e << ref(const_cast<RunConfig&>(c));
    }
  };
  return f;
}

Field text(std::string key, std::string help, std::function<std::string&(RunConfig&)> ref) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref](RunConfig& c, const YAML::Node& n, const std::string& where, std::vector<std::string>& errs) {
    if (!n.IsScalar()) {
      errs.push_back(key + where + ": expected a string, got a " + (n.IsMap() ? "map" : "list"));
      return;
    }
    ref(c) = n.Scalar();
  };
  f.emit = [ref](const RunConfig& c, YAML::Emitter& e) { e << YAML::DoubleQuoted << ref(const_cast<RunConfig&>(c)); };
  return f;
}

// List of strings (YAML sequence; --set key=[a,b]).
Field text_list(std::string key, std::string help, std::function<std::vector<std::string>&(RunConfig&)> ref) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref](RunConfig& c, const YAML::Node& n, const std::string& where, std::vector<std::string>& errs) {
    if (!n.IsSequence()) {
      errs.push_back(key + where + ": expected a list of strings, e.g. [blocks.0., ln_f.]");
      return;
    }
    std::vector<std::string> v;
    for (const auto& item : n) {
      if (!item.IsScalar()) {
        errs.push_back(key + where + ": expected a list of strings, got a nested item");
        return;
      }
      v.push_back(item.Scalar());
    }
    ref(c) = v;
  };
  f.emit = [ref](const RunConfig& c, YAML::Emitter& e) {
    e << YAML::Flow << YAML::BeginSeq;
    for (const auto& s : ref(const_cast<RunConfig&>(c))) e << s;
    e << YAML::EndSeq;
  };
  return f;
}

// String field that becomes an enum: `parse` throws ConfigError for unknown spellings.
template <typename E>
Field choice(std::string key, std::string help, std::function<E&(RunConfig&)> ref, E (*parse)(std::string_view),
             std::string (*print)(E)) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref, parse](RunConfig& c, const YAML::Node& n, const std::string& where,
                            std::vector<std::string>& errs) {
    std::string s = n.IsScalar() ? n.Scalar() : "<not a scalar>";
    try {
      ref(c) = parse(s);
    } catch (const ConfigError& e) {
      std::string m = e.what();
      auto colon = m.find("expected");
      errs.push_back(key + where + ": " + (colon == std::string::npos ? m : m.substr(colon)));
    }
  };
  f.emit = [ref, print](const RunConfig& c, YAML::Emitter& e) { e << print(ref(const_cast<RunConfig&>(c))); };
  return f;
}

}  // namespace

using I = int64_t;

// The `finetune` section (`lmtrain finetune`).
static std::vector<Field> finetune_fields() {
  return {
      text("finetune.from", "starting checkpoint of `lmtrain finetune` (set by --from)", [](RunConfig& c) -> std::string& { return c.finetune.from; }),
      choice<train::EmbeddingFreeze>("finetune.freeze_embeddings", "false | true (freeze the token table; tied head: the output projection too) | old (freeze the rows of the checkpoint's pieces; the rows of added pieces train)", [](RunConfig& c) -> train::EmbeddingFreeze& { return c.finetune.freeze_embeddings; }, train::parse_embedding_freeze, train::to_string),
      scalar<bool>("finetune.freeze_positions", "freeze learned positions", [](RunConfig& c) -> bool& { return c.finetune.freeze_positions; }),
      text_list("finetune.freeze", "further parameter-name prefixes to freeze", [](RunConfig& c) -> std::vector<std::string>& { return c.finetune.freeze; }),
      scalar<bool>("finetune.untie_head", "copy a tied head out of the token table so it can train on its own", [](RunConfig& c) -> bool& { return c.finetune.untie_head; }),
      scalar<double>("finetune.embedding_lr_scale", "lr multiplier of trainable token/position embeddings", [](RunConfig& c) -> double& { return c.finetune.embedding_lr_scale; }, 1e-6, 10.0),
      scalar<I>("finetune.unfreeze_embeddings_after", "unfreeze the frozen embeddings after this many steps (0 = never)", [](RunConfig& c) -> I& { return c.finetune.unfreeze_embeddings_after; }, 0),
      text("finetune.original_val", "original corpus val text for the forgetting report (\"\" = the checkpoint's data.val)", [](RunConfig& c) -> std::string& { return c.finetune.original_val; }),
      scalar<I>("finetune.drift_every", "steps between drift reports (0 = end only)", [](RunConfig& c) -> I& { return c.finetune.drift_every; }, 0),
      scalar<I>("finetune.drift_top_k", "most-moved pieces listed", [](RunConfig& c) -> I& { return c.finetune.drift_top_k; }, 0, 10000),
      scalar<I>("finetune.new_pieces", "append N pieces of a tokenizer trained on the new text to the vocabulary (BPE; with the pieces BPE needs on the way to them)", [](RunConfig& c) -> I& { return c.finetune.new_pieces; }, 0),
      text("finetune.new_pieces_from", "append the pieces listed in this file (one a line) to the vocabulary", [](RunConfig& c) -> std::string& { return c.finetune.new_pieces_from; }),
      choice<train::NewRowsInit>("finetune.new_rows_init", "how added pieces' rows start: pieces (mean of the rows of the old pieces they split into, less its part along the mean row) | mean (of all rows) | normal (as pretraining)", [](RunConfig& c) -> train::NewRowsInit& { return c.finetune.new_rows_init; }, train::parse_new_rows_init, train::to_string),
      choice<train::Objective>("finetune.objective", "next_token (the language-model loss) | contrastive (in-batch InfoNCE over pooled line vectors: a sentence encoder)", [](RunConfig& c) -> train::Objective& { return c.finetune.objective; }, train::parse_objective, train::to_string),
      choice<model::Pool>("finetune.pool", "contrastive: how a line's hidden states become its vector, as embed --pool: mean | weighted | last", [](RunConfig& c) -> model::Pool& { return c.finetune.pool; }, [](std::string_view v) { return model::parse_pool(v, "[finetune] pool"); }, model::to_string),
      scalar<double>("finetune.temperature", "contrastive: InfoNCE temperature (cosines are divided by it)", [](RunConfig& c) -> double& { return c.finetune.temperature; }, 1e-3, 10.0),
      text("finetune.pairs", "contrastive: training pairs, one `anchor<TAB>positive` a line", [](RunConfig& c) -> std::string& { return c.finetune.pairs; }),
      text("finetune.val_pairs", "contrastive with finetune.pairs: held-out pairs, the same format (validation and retrieval)", [](RunConfig& c) -> std::string& { return c.finetune.val_pairs; }),
      choice<train::Positives>("finetune.positives", "contrastive without finetune.pairs: next_line (the lines of each data.train file two at a time, 1 with 2, 3 with 4, never across a blank line or a file; held-out pairs the same way from the validation text)", [](RunConfig& c) -> train::Positives& { return c.finetune.positives; }, train::parse_positives, train::to_string),
      scalar<double>("finetune.lm_weight", "contrastive: weight of the next-token loss on the same lines (0 = none)", [](RunConfig& c) -> double& { return c.finetune.lm_weight; }, 0.0, 100.0),
  };
}

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = [] {
    std::vector<Field> f = {
      text("run.dir", "run directory (tokenizer, token files, checkpoints)", [](RunConfig& c) -> std::string& { return c.run.dir; }),
      scalar<uint64_t>("run.seed", "seed for initialisation and batch sampling", [](RunConfig& c) -> uint64_t& { return c.run.seed; }),
      scalar<int>("run.threads", "LibTorch intra-op threads", [](RunConfig& c) -> int& { return c.run.threads; }, 1, 256),
      scalar<int>("run.blas_threads", "OpenBLAS threads for matrix products (0 = auto: the cores divided among the processes)", [](RunConfig& c) -> int& { return c.run.blas_threads; }, 0, 256),
      choice<util::DeviceSpec>("run.device", "auto | cpu | cuda | cuda:N (auto = CUDA when LibTorch sees a GPU)", [](RunConfig& c) -> util::DeviceSpec& { return c.run.device; }, util::parse_device, util::to_string),
      choice<util::Kernels>("run.kernels", "the model's operations in training: auto (fused where it applies, else reference) | fused (CPU fp32: products split over the threads, fused loss and attention; refused elsewhere) | reference (LibTorch's ops, OpenBLAS's threads)", [](RunConfig& c) -> util::Kernels& { return c.run.kernels; }, util::parse_kernels, util::to_string),
      choice<util::Precision>("run.precision", "matrix products: auto | fp32 | bf16 (auto = bf16 on CUDA >= 8.0, and on a CPU where bf16 products measure >= 1.3x fp32's at start-up)", [](RunConfig& c) -> util::Precision& { return c.run.precision; }, util::parse_precision, util::to_string),
      scalar<bool>("run.deterministic", "LibTorch's deterministic algorithms (CUDA reproducibility)", [](RunConfig& c) -> bool& { return c.run.deterministic; }),
      text("data.train", "training text: a file, a directory (its files, recursively) or a glob pattern", [](RunConfig& c) -> std::string& { return c.data.train; }),
      text("data.val", "validation text, the same forms (\"\" = hold out data.val_fraction of data.train's lines, or of its files when it names several)", [](RunConfig& c) -> std::string& { return c.data.val; }),
      scalar<double>("data.val_fraction", "share of data.train's lines held out for validation when data.val is \"\" (whole lines, in blocks placed by run.seed; whole files, chosen by run.seed, when data.train names several)", [](RunConfig& c) -> double& { return c.data.val_fraction; }, 0.0, 0.5),
      choice<tokenizer::TextUnit>("data.unit", "what one unit of text is: line (each line) | paragraph (each blank-line-separated block of lines, joined: for hard-wrapped text such as man pages, plain-text books or mail)", [](RunConfig& c) -> tokenizer::TextUnit& { return c.data.unit; }, tokenizer::parse_text_unit, tokenizer::to_string),
      scalar<I>("data.shard_tokens", "token ids per shard of the prepared data (the default is 256 MiB of 2-byte ids)", [](RunConfig& c) -> I& { return c.data.shard_tokens; }, 1024),
      scalar<int>("tokenizer.vocab_size", "SentencePiece vocabulary size (= model rows V)", [](RunConfig& c) -> int& { return c.tokenizer.vocab_size; }, 8, 1000000),
      choice<tokenizer::ModelType>("tokenizer.model_type", "bpe | unigram", [](RunConfig& c) -> tokenizer::ModelType& { return c.tokenizer.model_type; }, tokenizer::parse_model_type, tokenizer::to_string),
      scalar<double>("tokenizer.character_coverage", "fraction of characters the vocabulary covers", [](RunConfig& c) -> double& { return c.tokenizer.character_coverage; }, 0.5, 1.0),
      scalar<bool>("tokenizer.byte_fallback", "256 byte pieces <0x00>..<0xFF> in the vocabulary, so no character is ever <unk> (needs vocab_size above 256 + the corpus's characters)", [](RunConfig& c) -> bool& { return c.tokenizer.byte_fallback; }),
      choice<tokenizer::Normalization>("tokenizer.normalization", "nfkc (NFKC; leading, trailing and repeated spaces dropped) | identity (the text as it is, as llama.cpp tokenizes)", [](RunConfig& c) -> tokenizer::Normalization& { return c.tokenizer.normalization; }, tokenizer::parse_normalization, tokenizer::to_string),
      scalar<I>("tokenizer.max_sentences", "lines sampled to train the tokenizer (0 = auto: every line up to 100 MB of text, a sample of 1000000 above)", [](RunConfig& c) -> I& { return c.tokenizer.max_sentences; }, 0),
      scalar<I>("model.d_model", "width C of token vectors", [](RunConfig& c) -> I& { return c.model.d_model; }, 1, 65536),
      scalar<I>("model.n_layers", "transformer blocks L", [](RunConfig& c) -> I& { return c.model.n_layers; }, 1, 1024),
      scalar<I>("model.n_heads", "attention heads H (divides d_model)", [](RunConfig& c) -> I& { return c.model.n_heads; }, 1, 1024),
      scalar<I>("model.max_seq_len", "context length T in tokens", [](RunConfig& c) -> I& { return c.model.max_seq_len; }, 1, 1 << 20),
      scalar<I>("model.mlp_ratio", "MLP hidden width / d_model", [](RunConfig& c) -> I& { return c.model.mlp_ratio; }, 1, 64),
      choice<model::Positions>("model.positions", "learned | sinusoidal (added to the token rows) | rope (q and k rotated per head; nothing added)", [](RunConfig& c) -> model::Positions& { return c.model.positions; }, model::parse_positions, model::to_string),
      scalar<bool>("model.tie_embeddings", "logits through the token table (true) or a separate head", [](RunConfig& c) -> bool& { return c.model.tie_embeddings; }),
      choice<model::EmbeddingScale>("model.embedding_scale", "none | sqrt_d", [](RunConfig& c) -> model::EmbeddingScale& { return c.model.embedding_scale; }, model::parse_embedding_scale, model::to_string),
      choice<model::MlpActivation>("model.mlp_activation", "the MLP's activation: gelu (erf GELU, GPT-2) | relu2 (relu(x)^2, Primer; no Hugging Face export)", [](RunConfig& c) -> model::MlpActivation& { return c.model.mlp_activation; }, model::parse_mlp_activation, model::to_string),
      scalar<double>("model.rope_base", "rope: pair i of a head turns by position x rope_base^(-2i/head_dim)", [](RunConfig& c) -> double& { return c.model.rope_base; }, 1.0, 1e12),
      scalar<bool>("model.qk_norm", "scale each head's q and k to unit RMS (no parameters) before the scores", [](RunConfig& c) -> bool& { return c.model.qk_norm; }),
      scalar<bool>("model.bias", "biases in the linear layers (LayerNorm keeps its weight and bias)", [](RunConfig& c) -> bool& { return c.model.bias; }),
      scalar<double>("model.init_std", "std of the linear layers' initial weights (residual projections: / sqrt(2 n_layers))", [](RunConfig& c) -> double& { return c.model.init_std; }, 0.0, 10.0),
      scalar<double>("model.embedding_init_std", "std of the token table's (and learned positions') initial rows (default: model.init_std)", [](RunConfig& c) -> double& { return c.model.embedding_init_std; }, 0.0, 10.0),
      scalar<bool>("model.zero_init_proj", "attention's and the MLP's output projections start at zero", [](RunConfig& c) -> bool& { return c.model.zero_init_proj; }),
      scalar<double>("model.logit_softcap", "c > 0: logits become c tanh(logits / c) in the loss and when sampling (0 = off)", [](RunConfig& c) -> double& { return c.model.logit_softcap; }, 0.0, 1e6),
      scalar<I>("train.batch_size", "sequences per micro-batch per process", [](RunConfig& c) -> I& { return c.train.batch_size; }, 1, 1 << 20),
      scalar<I>("train.grad_accum", "micro-batches per optimizer step", [](RunConfig& c) -> I& { return c.train.grad_accum; }, 1, 1 << 20),
      scalar<I>("train.max_steps", "optimizer steps", [](RunConfig& c) -> I& { return c.train.max_steps; }, 1),
      choice<train::OptimizerKind>("train.optimizer", "adamw | muon (Muon for the blocks' 2-D matrices, AdamW for the rest)", [](RunConfig& c) -> train::OptimizerKind& { return c.train.optimizer; }, train::parse_optimizer_kind, train::to_string),
      scalar<double>("train.lr", "peak learning rate (AdamW)", [](RunConfig& c) -> double& { return c.train.lr; }, 1e-12, 10.0),
      scalar<double>("train.muon_lr", "Muon's peak learning rate (same schedule as train.lr)", [](RunConfig& c) -> double& { return c.train.muon_lr; }, 1e-12, 10.0),
      scalar<double>("train.muon_momentum", "Muon's Nesterov momentum", [](RunConfig& c) -> double& { return c.train.muon_momentum; }, 0.0, 0.999999),
      scalar<I>("train.muon_ns_steps", "Newton-Schulz iterations per Muon update", [](RunConfig& c) -> I& { return c.train.muon_ns_steps; }, 1, 100),
      choice<util::Precision>("train.muon_precision", "Muon's Newton-Schulz products: auto | fp32 | bf16 (auto = bf16 on CUDA >= 8.0, and on a CPU where bf16 products measure >= 1.3x fp32's at start-up)", [](RunConfig& c) -> util::Precision& { return c.train.muon_precision; }, util::parse_precision, util::to_string),
      scalar<double>("train.min_lr", "learning rate at the end of the cosine decay", [](RunConfig& c) -> double& { return c.train.min_lr; }, 0.0, 10.0),
      scalar<I>("train.warmup_steps", "linear warmup steps", [](RunConfig& c) -> I& { return c.train.warmup_steps; }, 0),
      scalar<double>("train.weight_decay", "AdamW weight decay on 2-D matmul weights", [](RunConfig& c) -> double& { return c.train.weight_decay; }, 0.0, 10.0),
      scalar<double>("train.beta1", "AdamW beta1", [](RunConfig& c) -> double& { return c.train.beta1; }, 0.0, 0.999999),
      scalar<double>("train.beta2", "AdamW beta2", [](RunConfig& c) -> double& { return c.train.beta2; }, 0.0, 0.999999),
      scalar<double>("train.eps", "AdamW epsilon", [](RunConfig& c) -> double& { return c.train.eps; }, 1e-30, 1.0),
      scalar<double>("train.grad_clip", "global gradient-norm clip (0 = off)", [](RunConfig& c) -> double& { return c.train.grad_clip; }, 0.0),
      scalar<I>("train.eval_every", "steps between validations (0 = end only)", [](RunConfig& c) -> I& { return c.train.eval_every; }, 0),
      scalar<I>("train.eval_batches", "batches per periodic validation", [](RunConfig& c) -> I& { return c.train.eval_batches; }, 1),
      scalar<I>("train.log_every", "steps between log lines", [](RunConfig& c) -> I& { return c.train.log_every; }, 1),
      scalar<I>("train.early_stopping_patience", "validations without improvement before stopping (0 = off)", [](RunConfig& c) -> I& { return c.train.early_stopping_patience; }, 0),
      choice<train::NonFinitePolicy>("train.on_nonfinite", "stop | skip a step whose loss or grad norm is NaN/Inf", [](RunConfig& c) -> train::NonFinitePolicy& { return c.train.on_nonfinite; }, train::parse_nonfinite_policy, train::to_string),
      scalar<I>("train.max_skips", "consecutive skipped steps allowed with on_nonfinite: skip", [](RunConfig& c) -> I& { return c.train.max_skips; }, 0),
    };
    for (auto& field : finetune_fields()) f.push_back(std::move(field));
    for (auto& field : std::vector<Field>{
      scalar<I>("checkpoint.every", "steps between checkpoints (0 = final only)", [](RunConfig& c) -> I& { return c.checkpoint.every; }, 0),
      scalar<I>("checkpoint.keep_last", "step checkpoints kept on disk (plus `best`)", [](RunConfig& c) -> I& { return c.checkpoint.keep_last; }, 2),
      scalar<I>("dist.timeout_s", "seconds within which a lost or missing rank ends the others (exit 7)", [](RunConfig& c) -> I& { return c.dist.timeout_s; }, 1, 86400),
      scalar<I>("dist.bucket_mb", "gradient all-reduce bucket size in MiB", [](RunConfig& c) -> I& { return c.dist.bucket_mb; }, 1, 4096),
      scalar<bool>("dist.overlap", "start each bucket's all-reduce during the backward pass", [](RunConfig& c) -> bool& { return c.dist.overlap; }),
         }) {
      f.push_back(std::move(field));
    }
    return f;
  }();
  return kFields;
}

const Field* find_field(const std::string& key) {
  for (const auto& f : fields()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

}  // namespace lm::config
