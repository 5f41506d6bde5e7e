#include "data/batcher.h"

#include "util/errors.h"

namespace lm::data {

uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {

Batch gather_windows(const TokenFile& file, int64_t T, const std::vector<uint64_t>& starts) {
  const int64_t B = static_cast<int64_t>(starts.size());
  auto buf = torch::empty({B, T + 1}, torch::kInt64);  // (B,T+1)
  int64_t* p = buf.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) file.copy(starts[b], static_cast<uint64_t>(T + 1), p + b * (T + 1));
  return {buf.narrow(1, 0, T).contiguous(), buf.narrow(1, 1, T).contiguous()};
}

}  // namespace

Batcher::Batcher(const TokenFile& file, int64_t batch_size, int64_t seq_len, uint64_t seed, int rank, int world)
    : file_(&file), B_(batch_size), T_(seq_len), seed_(seed), rank_(static_cast<uint64_t>(rank)),
      world_(static_cast<uint64_t>(world)) {
  if (file.size() < static_cast<uint64_t>(seq_len + 1)) {
    throw DataError("[batcher] token file '" + file.path().string() + "' too small: expected at least " +
                    std::to_string(seq_len + 1) + " tokens (max_seq_len + 1), got " +
                    std::to_string(file.size()) + ". Hint: use more text or a smaller model.max_seq_len.");
  }
}

Batch Batcher::next() { return at(cursor_++); }

Batch Batcher::at(uint64_t k) const {
  const uint64_t range = file_->size() - static_cast<uint64_t>(T_);  // valid starts: [0, range)
  const uint64_t B = static_cast<uint64_t>(B_);
  const uint64_t first = k * B * world_ + rank_ * B;  // this rank's first window in the global batch
  std::vector<uint64_t> starts(static_cast<size_t>(B_));
  for (uint64_t b = 0; b < B; ++b) starts[b] = splitmix64(splitmix64(seed_ ^ 0x6c6d747261696eULL) + first + b) % range;
  return gather_windows(*file_, T_, starts);
}

int64_t eval_window_count(const TokenFile& file, int64_t seq_len) {
  if (file.size() < static_cast<uint64_t>(seq_len + 1)) return 0;
  return static_cast<int64_t>((file.size() - 1) / static_cast<uint64_t>(seq_len));
}

Batch eval_batch(const TokenFile& file, int64_t seq_len, const std::vector<int64_t>& windows) {
  std::vector<uint64_t> starts(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) starts[i] = static_cast<uint64_t>(windows[i] * seq_len);
  return gather_windows(file, seq_len, starts);
}

}  // namespace lm::data
