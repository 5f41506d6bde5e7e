// The tensor files of a checkpoint: model.safetensors (weights; old checkpoints: model.pt) and optimizer.pt
// (a name -> tensor dict, torch::pickle_save), written with deterministic bytes and read back with every
// name, dtype and shape checked before any copy.
#include "checkpoint/tensor_files.h"

#include <algorithm>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string dict_bytes(const c10::Dict<std::string, torch::Tensor>& dict) {
  std::vector<char> bytes = torch::pickle_save(dict);
  return std::string(bytes.begin(), bytes.end());
}

std::map<std::string, torch::Tensor> read_dict(const fs::path& p, const char* what) {
  std::string bytes = util::read_file(p, what);
  torch::IValue iv;
  try {
    iv = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    throw CheckpointError("[checkpoint] cannot read " + std::string(what) + " '" + p.string() + "': " + e.what_without_backtrace());
  }
  if (!iv.isGenericDict()) throw CheckpointError("[checkpoint] " + std::string(what) + ": expected a name -> tensor dict");
  std::map<std::string, torch::Tensor> out;
  for (const auto& kv : iv.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) {
      throw CheckpointError("[checkpoint] " + std::string(what) + " '" + p.string() + "': expected string -> tensor entries");
    }
    out[kv.key().toStringRef()] = kv.value().toTensor();
  }
  return out;
}

}  // namespace

std::string weights_bytes(const model::GptImpl& m) {
  SafeTensors st;
  st.tensors = model::named_weights(m);
  st.metadata = {{"format", "pt"}, {"lmtrain_arch", nlohmann::json(m.config()).dump()}};
  return safetensors_bytes(st);
}

fs::path weights_file(const fs::path& dir) {
  const fs::path st = dir / "model.safetensors";
  return fs::exists(st) || !fs::exists(dir / "model.pt") ? st : dir / "model.pt";
}

std::string optimizer_bytes(const torch::optim::AdamW& opt, const model::GptImpl& m,
                            const std::map<std::string, torch::Tensor>& other) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (auto& [name, p] : model::named_weights(m)) {
    auto it = opt.state().find(state_key(opt.state(), p));
    if (it == opt.state().end()) continue;  // no step taken yet, or a frozen parameter
    const auto& st = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    dict.insert(name + ".step", torch::tensor(st.step(), torch::kInt64));
    dict.insert(name + ".exp_avg", st.exp_avg().detach().cpu().contiguous());
    dict.insert(name + ".exp_avg_sq", st.exp_avg_sq().detach().cpu().contiguous());
    if (st.max_exp_avg_sq().defined()) dict.insert(name + ".max_exp_avg_sq", st.max_exp_avg_sq().detach().cpu().contiguous());
  }
  for (const auto& [key, t] : other) dict.insert(key, t);
  return dict_bytes(dict);
}

void load_weights(model::GptImpl& model, const fs::path& dir, MissingHead missing_head) {
  copy_weights(model, read_weights(dir, missing_head), weights_file(dir).string());
}

std::map<std::string, torch::Tensor> read_weights(const fs::path& dir, MissingHead missing_head) {
  const bool head_from_tok_emb = missing_head == MissingHead::kFromTokEmb;
  const fs::path file = weights_file(dir);
  std::map<std::string, torch::Tensor> stored;
  if (file.extension() == ".safetensors") {
    for (auto& [name, t] : read_safetensors(file).tensors) stored[name] = t;
  } else {
    stored = read_dict(file, "weights");  // a checkpoint from before model.safetensors
  }
  if (head_from_tok_emb && !stored.count("head.weight") && stored.count("tok_emb.weight")) {
    stored["head.weight"] = stored["tok_emb.weight"].clone();
  }
  return stored;
}

void copy_weights(model::GptImpl& model, const std::map<std::string, torch::Tensor>& stored, const std::string& origin) {
  auto expected = model::named_weights(model);
  // Check everything before copying anything: torch::load alone would silently take the file's shapes.
  for (auto& [name, t] : expected) {
    auto it = stored.find(name);
    if (it == stored.end()) throw CheckpointError("[checkpoint] weight missing: expected '" + name + "' in " + origin);
    if (it->second.scalar_type() != torch::kFloat) {
      throw CheckpointError("[checkpoint] dtype of '" + name + "' in " + origin + ": expected F32, got " +
                            std::string(c10::toString(it->second.scalar_type())));
    }
    if (it->second.sizes() != t.sizes()) {
      std::ostringstream ss;
      ss << "[checkpoint] shape of '" << name << "': expected " << t.sizes() << ", got " << it->second.sizes();
      throw CheckpointError(ss.str());
    }
  }
  if (stored.size() != expected.size()) {
    for (const auto& entry : stored) {  // (a lambda may not capture a structured binding before C++20)
      const std::string& name = entry.first;
      bool known = std::any_of(expected.begin(), expected.end(), [&](auto& e) { return e.first == name; });
      if (!known) {
        throw CheckpointError("[checkpoint] unexpected weight '" + name + "' (does tie_embeddings match the checkpoint?)");
      }
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : expected) t.copy_(stored.at(name));
}

std::map<std::string, torch::Tensor> load_optimizer(torch::optim::AdamW& opt, const model::GptImpl& model,
                                                    const fs::path& dir) {
  fs::path p = dir / "optimizer.pt";
  if (!fs::is_regular_file(p)) throw CheckpointError("[checkpoint] optimizer state missing: expected " + p.string());
  auto stored = read_dict(p, "optimizer state");
  std::set<const void*> stepped;  // the parameters this AdamW steps
  for (const auto& group : opt.param_groups()) {
    for (const auto& q : group.params()) stepped.insert(q.unsafeGetTensorImpl());
  }
  std::map<std::string, torch::Tensor> other;
  size_t used = 0;
  for (auto& [name, param] : model::named_weights(model)) {
    if (auto mb = stored.find(name + ".momentum_buffer"); mb != stored.end()) {  // shape checked by its optimizer
      other.insert(*mb);
      ++used;
    }
    auto step = stored.find(name + ".step");
    if (step == stored.end()) continue;
    if (!stepped.count(param.unsafeGetTensorImpl())) {
      throw CheckpointError("[checkpoint] optimizer state of '" + name + "' is AdamW's, but this run does not step it "
                            "with AdamW. Hint: resume with the checkpoint's train.optimizer");
    }
    auto avg = stored.find(name + ".exp_avg"), sq = stored.find(name + ".exp_avg_sq");
    if (avg == stored.end() || sq == stored.end() || avg->second.sizes() != param.sizes() ||
        sq->second.sizes() != param.sizes()) {
      throw CheckpointError("[checkpoint] optimizer state of '" + name + "': expected exp_avg/exp_avg_sq shaped like the parameter");
    }
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->step(step->second.item<int64_t>());
    st->exp_avg(avg->second.to(param.device()).clone());  // the state lives where the parameter does
    st->exp_avg_sq(sq->second.to(param.device()).clone());
    used += 3;
    if (auto mx = stored.find(name + ".max_exp_avg_sq"); mx != stored.end()) {
      st->max_exp_avg_sq(mx->second.to(param.device()).clone());
      ++used;
    }
    opt.state()[state_key(opt.state(), param)] = std::move(st);
  }
  if (used != stored.size()) {
    throw CheckpointError("[checkpoint] optimizer state '" + p.string() + "' names parameters this model does not have");
  }
  return other;
}

}  // namespace lm::checkpoint
