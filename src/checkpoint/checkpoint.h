// Checkpoint directories (docs/ARCHITECTURE.md "Checkpoint contract"). A checkpoint RUN/step_00001000/
// holds:
//   model.safetensors   weights by parameter name, F32, architecture in the metadata (safetensors.h);
//                       checkpoints written before it hold model.pt instead, which still loads
//   optimizer.pt        AdamW state as a name -> tensor dict: "<param>.exp_avg", "<param>.exp_avg_sq",
//                       "<param>.step" per parameter, and with Muon "<param>.momentum_buffer"
//                       (deterministic bytes; Python torch.load reads it)
//   trainer_state.json  step, tokens seen, data cursor, validation losses
//   config.yaml         the effective run config
//   arch.json           the GptConfig the weights belong to
//   tokenizer.model     the SentencePiece model the ids refer to
//   tokenizer.model.json  only when a fine-tune appended pieces: which, and the old pieces each came from
//   manifest.json       written last: format version, every file with size and SHA-256
// It is written as RUN/step_00001000.tmp-*, every file fsynced, then renamed into place; RUN/latest (a
// one-line text file naming the newest checkpoint) is replaced atomically afterwards.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/tensor_files.h"
#include "model/gpt.h"
#include "model/gpt_config.h"

namespace lm::checkpoint {

namespace fs = std::filesystem;

inline constexpr int kFormatVersion = 1;

/// Identity of the data a run trains on; a resume with different data is refused.
struct DataIdentity {
  std::string tokenizer_sha256;     ///< SHA-256 of tokenizer.model
  std::string train_source_sha256;  ///< SHA-256 of the training text
  std::string val_source_sha256;    ///< SHA-256 of the validation text
  uint64_t train_tokens = 0, val_tokens = 0;
  /// A contrastive fine-tune's pairs: "next_line", or the SHA-256 of its pairs and val_pairs files' SHA-256s;
  /// "" for next-token training.
  std::string pairs = "";
};

/// Training progress saved with each checkpoint: everything an exact resume needs besides the weights
/// and optimizer state.
struct TrainerState {
  int64_t step = 0;               ///< optimizer steps completed
  int64_t tokens_seen = 0;        ///< training tokens consumed
  uint64_t data_cursor = 0;       ///< index of the next training micro-batch (global: the same on every rank)
  int64_t world_size = 1;         ///< processes that trained it (a resume must use as many)
  double last_val_loss = NAN;     ///< most recent validation loss (nats), NaN if none yet
  double last_val_bpb = NAN;      ///< the same in bits per UTF-8 byte of decoded text, NaN if none yet
  double best_val_loss = NAN;     ///< lowest validation loss so far (nats), NaN if none yet
  int64_t evals_without_improvement = 0;  ///< for train.early_stopping_patience
  bool early_stopped = false;     ///< patience ran out: a resume does not train further
  int64_t consecutive_skips = 0;  ///< non-finite steps skipped in a row (on_nonfinite: skip)
  double log_window_loss_sum = 0.0;  ///< losses of the steps since the last log line, so a resumed run
  int64_t log_window_steps = 0;      ///< prints the same averages as one that never stopped
  std::string torch_rng_state;    ///< LibTorch CPU generator state, hex
  /// The products' precision the run trained in ("fp32" | "bf16"; "" in older checkpoints): a resume under
  /// run.precision auto keeps it rather than measuring again.
  std::string precision;
  std::string muon_precision;  ///< Muon's Newton-Schulz products' likewise ("" without Muon or in older checkpoints)
  DataIdentity data;
};

/// Whether a trainer_state.json written before a field existed may lack it (it then keeps its default).
enum class Presence { kRequired, kMayLack };

/// Every field of DataIdentity and of TrainerState, once, in order, with its trainer_state.json key and
/// presence: JSON in and out walk these lists (checkpoint.cpp), whose static_asserts fail until a new member
/// is listed. `visit(key, field, presence)` gets int64_t&, uint64_t&, double& (NaN is JSON null), bool&,
/// std::string& or DataIdentity& (its own object, "data").
template <class Identity, class Visit>
void visit_identity_fields(Identity& d, Visit&& visit) {
  visit("tokenizer_sha256", d.tokenizer_sha256, Presence::kMayLack);
  visit("train_source_sha256", d.train_source_sha256, Presence::kMayLack);
  visit("val_source_sha256", d.val_source_sha256, Presence::kMayLack);
  visit("train_tokens", d.train_tokens, Presence::kMayLack);
  visit("val_tokens", d.val_tokens, Presence::kMayLack);
  visit("pairs", d.pairs, Presence::kMayLack);
}
template <class State, class Visit>
void visit_state_fields(State& s, Visit&& visit) {
  visit("step", s.step, Presence::kRequired);
  visit("tokens_seen", s.tokens_seen, Presence::kRequired);
  visit("data_cursor", s.data_cursor, Presence::kRequired);
  visit("world_size", s.world_size, Presence::kMayLack);
  visit("last_val_loss", s.last_val_loss, Presence::kRequired);
  visit("last_val_bpb", s.last_val_bpb, Presence::kMayLack);
  visit("best_val_loss", s.best_val_loss, Presence::kRequired);
  visit("evals_without_improvement", s.evals_without_improvement, Presence::kMayLack);
  visit("early_stopped", s.early_stopped, Presence::kMayLack);
  visit("consecutive_skips", s.consecutive_skips, Presence::kMayLack);
  visit("log_window_loss_sum", s.log_window_loss_sum, Presence::kMayLack);
  visit("log_window_steps", s.log_window_steps, Presence::kMayLack);
  visit("torch_rng_state", s.torch_rng_state, Presence::kMayLack);
  visit("precision", s.precision, Presence::kMayLack);
  visit("muon_precision", s.muon_precision, Presence::kMayLack);
  visit("data", s.data, Presence::kMayLack);
}

/// trainer_state.json's text for `s` (every listed field), and `s` from that text (a field marked kMayLack
/// may be missing). Throws nlohmann::json::exception on a missing required field or a wrong type.
std::string trainer_state_json(const TrainerState& s);
TrainerState trainer_state_from_json(const std::string& text);

/// What a save needs. Pointers are borrowed for the duration of the call.
struct SaveRequest {
  const model::GptImpl* model = nullptr;
  const torch::optim::AdamW* optimizer = nullptr;  ///< may be null (weights only)
  std::map<std::string, torch::Tensor> muon_state;  ///< Muon's momentum buffers by "<param>.momentum_buffer"
  TrainerState state;
  std::string config_yaml;
  fs::path tokenizer_model;
  bool update_latest = true;  ///< point RUN/latest at it (false for `best`)
  /// A fine-tune's extended tokenizer's sidecar (tokenizer/extend.h), saved as tokenizer.model.json; empty: none.
  fs::path tokenizer_extension;
};

/// Writes RUN/NAME atomically and, when asked, points RUN/latest at it. An existing RUN/NAME is replaced
/// only after the new one is complete. Returns the checkpoint path.
/// Throws SaveError; on failure nothing named NAME appears and `latest` is unchanged.
fs::path save_checkpoint(const fs::path& run_dir, const std::string& name, const SaveRequest& req);

/// Re-hashes every file against manifest.json. Throws CheckpointError naming the first mismatch.
void verify_checkpoint(const fs::path& dir);

/// A checkpoint path from a user argument: a checkpoint directory itself, or a run directory whose
/// `latest` names one. A stale `latest` (naming a missing directory or one without manifest.json) gives the
/// newest checkpoint of the run with a warning naming the pointer. Throws CheckpointError (no checkpoint;
/// a stale `latest` and no other checkpoint; a `latest` naming something outside the run).
fs::path resolve_checkpoint(const fs::path& path);

/// A verified checkpoint with its model rebuilt from arch.json and weights checked name by name.
struct LoadedCheckpoint {
  fs::path dir;
  model::GptConfig arch;
  model::Gpt model{nullptr};
  TrainerState state;
  std::string config_yaml;
  fs::path tokenizer_model;  ///< dir / tokenizer.model
};

/// Verifies, rebuilds (computing with `ops`) and loads. Throws CheckpointError on any mismatch (missing/extra
/// name, shape).
LoadedCheckpoint load_checkpoint(const fs::path& dir, model::OpsPtr ops = model::reference_ops());

/// The committed step_* checkpoints of `run_dir` (with a manifest), oldest first; empty when none.
std::vector<fs::path> list_checkpoints(const fs::path& run_dir);

/// Deletes the oldest step_* checkpoints of `run_dir` beyond the newest `keep_last`.
void prune_checkpoints(const fs::path& run_dir, int64_t keep_last);

/// Reads trainer_state.json and arch.json of a checkpoint without loading any tensor (resume preflight).
TrainerState read_trainer_state(const fs::path& dir);
model::GptConfig read_arch(const fs::path& dir);

/// Removes unfinished saves (RUN/*.tmp-*) and returns their names.
std::vector<std::string> remove_stale_temps(const fs::path& run_dir);

/// Checkpoint directory name for a step: "step_00001000".
std::string step_name(int64_t step);

}  // namespace lm::checkpoint
