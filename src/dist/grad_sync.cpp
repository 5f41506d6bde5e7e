#include "dist/grad_sync.h"

#include "util/clock.h"

namespace lm::dist {

GradSync::GradSync(Group& group, const std::vector<torch::Tensor>& params) : group_(group) {
  const int64_t cap = std::max<int64_t>(1, group.config().bucket_mb) * 1024 * 1024;  // bytes
  for (auto it = params.rbegin(); it != params.rend(); ++it) {  // gradients arrive roughly last layer first
    if (!it->requires_grad()) continue;
    const int64_t size = static_cast<int64_t>(it->element_size());
    if (buckets_.empty() || (buckets_.back().numel > 0 && (buckets_.back().numel + it->numel()) * size > cap)) {
      buckets_.emplace_back();
    }
    Bucket& b = buckets_.back();
    slots_.push_back({*it, buckets_.size() - 1, b.numel, torch::Tensor(), false});
    b.numel += it->numel();
    ++b.expected;
  }
  // A bucket holds parameters of one dtype and device: all of lmtrain's are fp32 on one device.
  for (auto& b : buckets_) b.flat = torch::zeros({b.numel}, slots_.front().param.options().requires_grad(false));
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    s.grad = buckets_[s.bucket].flat.narrow(0, s.offset, s.param.numel()).view_as(s.param);
    hook_ids_.push_back(s.param.register_hook([this, i](const torch::Tensor& g) {
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
  for (auto& s : slots_) s.seen = false;
  for (auto& b : buckets_) b.ready = 0;
}

// Called by autograd with this micro-batch's gradient of one parameter, before it is added to .grad:
// the bucket slot receives .grad (earlier micro-batches) + this gradient, the value .grad will hold.
void GradSync::on_grad(size_t i, const torch::Tensor& grad) {
  Slot& s = slots_[i];
  if (!armed_ || s.seen) return;
  s.seen = true;
  const torch::Tensor& acc = s.param.grad();
  if (acc.defined()) {
    torch::add_out(s.grad, acc, grad);
  } else {
    s.grad.copy_(grad);
  }
  Bucket& b = buckets_[s.bucket];
  if (++b.ready == b.expected && group_.config().overlap) launch(b);
}

void GradSync::launch(Bucket& b) { b.work = group_.allreduce_async(b.flat); }

double GradSync::finish() {
  const auto t0 = util::Clock::now();
  for (auto& s : slots_) {
    if (s.seen) continue;  // a parameter the loss did not reach: its accumulated gradient, or zero
    if (s.param.grad().defined()) {
      s.grad.copy_(s.param.grad());
    } else {
      s.grad.zero_();
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
    if (s.param.grad().defined()) {
      s.param.mutable_grad().copy_(s.grad);
    } else {
      s.param.mutable_grad() = s.grad.clone();
    }
  }
  armed_ = false;
  return util::seconds_since(t0);
}

}  // namespace lm::dist
