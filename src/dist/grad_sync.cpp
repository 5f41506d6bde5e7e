#include "dist/grad_sync.h"

#include "util/clock.h"

namespace lm::dist {

GradSync::GradSync(Group& group, const std::vector<torch::Tensor>& params) : group_(group) {
  const int64_t cap = std::max<int64_t>(1, group.config().bucket_mb) * 1024 * 1024;
  int64_t bytes = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {  // gradients arrive roughly last layer first
    if (!it->requires_grad()) continue;
    const int64_t n = it->numel() * static_cast<int64_t>(it->element_size());
    if (buckets_.empty() || (bytes > 0 && bytes + n > cap)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    slots_.push_back({*it, buckets_.size() - 1, bytes / static_cast<int64_t>(it->element_size())});
    ++b.expected;
    bytes += n;
  }
  // Flat buffers: a bucket holds parameters of one dtype and device (all of lmtrain's are fp32 on one
  // device), sized by its slots.
  std::vector<int64_t> numel(buckets_.size(), 0);
  for (auto& s : slots_) numel[s.bucket] = std::max(numel[s.bucket], s.offset + s.param.numel());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    buckets_[i].flat = torch::zeros({numel[i]}, slots_.front().param.options().requires_grad(false));
  }
  seen_.assign(slots_.size(), false);
  for (size_t i = 0; i < slots_.size(); ++i) {
    hook_ids_.push_back(slots_[i].param.register_hook([this, i](const torch::Tensor& g) {
      on_grad(i, g);
      return torch::Tensor();  // the gradient itself is left unchanged
    }));
  }
}

GradSync::~GradSync() {
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].param.remove_hook(hook_ids_[i]);
}

void GradSync::arm() {
  armed_ = true;
  std::fill(seen_.begin(), seen_.end(), false);
  for (auto& b : buckets_) b.ready = 0;
}

// Called by autograd with this micro-batch's gradient of one parameter, before it is added to .grad:
// the bucket slot receives .grad (earlier micro-batches) + this gradient, the value .grad will hold.
void GradSync::on_grad(size_t i, const torch::Tensor& grad) {
  if (!armed_ || seen_[i]) return;
  seen_[i] = true;
  Slot& s = slots_[i];
  Bucket& b = buckets_[s.bucket];
  auto view = b.flat.narrow(0, s.offset, s.param.numel()).view_as(s.param);
  const torch::Tensor& acc = s.param.grad();
  if (acc.defined()) {
    torch::add_out(view, acc, grad);
  } else {
    view.copy_(grad);
  }
  if (++b.ready == b.expected && group_.config().overlap) launch(b);
}

void GradSync::launch(Bucket& b) { b.work = group_.allreduce_async(b.flat); }

double GradSync::finish() {
  const auto t0 = util::Clock::now();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (seen_[i]) continue;  // a parameter the loss did not reach: its accumulated gradient, or zero
    Slot& s = slots_[i];
    auto view = buckets_[s.bucket].flat.narrow(0, s.offset, s.param.numel()).view_as(s.param);
    if (s.param.grad().defined()) {
      view.copy_(s.param.grad());
    } else {
      view.zero_();
    }
  }
  for (auto& b : buckets_) {
    if (!b.work) launch(b);  // in bucket order on every rank, so the ranks' reductions pair up
  }
  for (auto& b : buckets_) {
    group_.wait(b.work, "the gradient all-reduce");
    b.work.reset();
    b.flat.div_(static_cast<double>(group_.size()));
  }
  for (auto& s : slots_) {
    auto avg = buckets_[s.bucket].flat.narrow(0, s.offset, s.param.numel()).view_as(s.param);
    if (s.param.grad().defined()) {
      s.param.mutable_grad().copy_(avg);
    } else {
      s.param.mutable_grad() = avg.clone();
    }
  }
  armed_ = false;
  return util::seconds_since(t0);
}

}  // namespace lm::dist
