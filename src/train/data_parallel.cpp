#include "train/data_parallel.h"

#include <spdlog/spdlog.h>

#include <csignal>

#include "checkpoint/tensor_files.h"
#include "util/errors.h"
#include "util/hash.h"
#include "util/signals.h"

namespace lm::train {
namespace {

// The SHA-256 a checkpoint's manifest would give model.safetensors for these weights.
std::string weights_digest(const model::GptImpl& m) { return util::sha256_hex(checkpoint::weights_bytes(m)); }

}  // namespace

DataParallel::DataParallel(dist::Group* group, model::GptImpl& model) : group_(group), model_(model) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  auto params = model_.parameters();
  std::vector<torch::Tensor> data;
  for (auto& p : params) data.push_back(p.data());
  group_->broadcast(data);
  retrack();
}

void DataParallel::retrack() {
  if (!group_) return;
  sync_.reset();  // its hooks go before the new ones are made
  sync_ = std::make_unique<dist::GradSync>(*group_, model_.parameters());
  spdlog::debug("dist: {} gradient bucket(s)", sync_->buckets());
}

void DataParallel::before_last_backward() {
  if (sync_) sync_->arm();
}

StepAgreement DataParallel::after_backward(double local_loss) {
  if (!group_) return {local_loss, 0.0};
  const int local_signal = util::stop_signal();
  StepAgreement a;
  a.comm_seconds = sync_->finish();
  auto v = torch::tensor({local_loss, local_signal == SIGINT ? 1.0 : 0.0, local_signal == SIGTERM ? 1.0 : 0.0},
                         torch::kFloat64);
  group_->allreduce_sum(v);
  a.loss = v[0].item<double>() / static_cast<double>(group_->size());
  agreed_signal_ = v[2].item<double>() > 0 ? SIGTERM : (v[1].item<double>() > 0 ? SIGINT : 0);
  return a;
}

int DataParallel::stop_signal() const { return group_ ? agreed_signal_ : util::stop_signal(); }

void DataParallel::on_root(const std::string& key, const std::function<void()>& fn) {
  if (!group_) return fn();
  group_->on_root(key, [&] {
    fn();
    return std::string();
  });
}

void DataParallel::check_replicas(const std::string& when) {
  if (!group_) return;
  const auto digests = group_->all_gather("replicas/" + when, weights_digest(model_));
  for (size_t r = 1; r < digests.size(); ++r) {
    if (digests[r] != digests[0]) {
      throw DistributedError("[dist] replicas diverged at " + when + ": expected rank " + std::to_string(r) +
                             " to hold rank 0's weights (sha256 " + digests[0].substr(0, 12) + "), got " +
                             digests[r].substr(0, 12) + ". Hint: this is a bug; please report it with the log.");
    }
  }
  spdlog::info("dist: {} ranks hold identical weights at {} (sha256 {})", digests.size(), when,
               digests[0].substr(0, 16));
}

}  // namespace lm::train
