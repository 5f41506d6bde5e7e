// The SentencePiece bridge: a narrow C ABI over SentencePieceProcessor/Trainer (see sp_bridge.h).
#include "tokenizer/sp_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#define LMSP_EXPORT extern "C" __attribute__((visibility("default")))

namespace sentencepiece::logging {
void SetMinLogLevel(int v);  // exported by libsentencepiece, not declared in its public headers
}

namespace {
// SentencePiece logs through std::cerr. Under RTLD_DEEPBIND this library binds to libstdc++'s own
// std::cerr, which stays unconstructed when the executable holds a copy-relocated std::cerr, so any
// log line crashes (seen: BPE training with a too-large vocab_size). Silence INFO/WARNING/ERROR (levels
// 0-2); failures still come back as util::Status messages, which is what lmtrain reports.
__attribute__((constructor)) void silence_sentencepiece_logging() { sentencepiece::logging::SetMinLogLevel(3); }
}  // namespace

struct lmsp_processor {
  sentencepiece::SentencePieceProcessor sp;
};

namespace {

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) {
    std::memcpy(out, s.data(), s.size());
    out[s.size()] = '\0';
  }
  return out;
}

int fail(char** err, const std::string& message) {
  if (err) *err = dup_string(message);
  return 1;
}

}  // namespace

LMSP_EXPORT int lmsp_train(const char* const* keys, const char* const* values, size_t n, char** err) {
  try {
    std::unordered_map<std::string, std::string> kwargs;
    for (size_t i = 0; i < n; ++i) kwargs[keys[i]] = values[i];
    auto status = sentencepiece::SentencePieceTrainer::Train(kwargs);
    if (!status.ok()) return fail(err, status.ToString());
    return 0;
  } catch (const std::exception& e) {
    return fail(err, e.what());
  }
}

LMSP_EXPORT int lmsp_load(const char* model_path, lmsp_processor** out, char** err) {
  auto* p = new (std::nothrow) lmsp_processor();
  if (!p) return fail(err, "out of memory");
  auto status = p->sp.Load(model_path);
  if (!status.ok()) {
    delete p;
    return fail(err, status.ToString());
  }
  *out = p;
  return 0;
}

LMSP_EXPORT void lmsp_unload(lmsp_processor* p) { delete p; }

LMSP_EXPORT int lmsp_encode(lmsp_processor* p, const char* text, size_t len, int32_t** ids, size_t* n,
                            char** err) {
  std::vector<int> out;
  auto status = p->sp.Encode(std::string(text, len), &out);
  if (!status.ok()) return fail(err, status.ToString());
  *n = out.size();
  *ids = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * (out.empty() ? 1 : out.size())));
  if (!*ids) return fail(err, "out of memory");
  for (size_t i = 0; i < out.size(); ++i) (*ids)[i] = out[i];
  return 0;
}

LMSP_EXPORT int lmsp_decode(lmsp_processor* p, const int32_t* ids, size_t n, char** text, size_t* len,
                            char** err) {
  std::vector<int> in(ids, ids + n);
  std::string out;
  auto status = p->sp.Decode(in, &out);
  if (!status.ok()) return fail(err, status.ToString());
  *text = dup_string(out);
  *len = out.size();
  return *text ? 0 : fail(err, "out of memory");
}

LMSP_EXPORT int32_t lmsp_vocab_size(lmsp_processor* p) { return p->sp.GetPieceSize(); }

LMSP_EXPORT int lmsp_id_to_piece(lmsp_processor* p, int32_t id, char** piece) {
  if (id < 0 || id >= p->sp.GetPieceSize()) return 1;
  *piece = dup_string(p->sp.IdToPiece(id));
  return *piece ? 0 : 1;
}

LMSP_EXPORT int32_t lmsp_piece_to_id(lmsp_processor* p, const char* piece) { return p->sp.PieceToId(piece); }

LMSP_EXPORT int32_t lmsp_special_id(lmsp_processor* p, int which) {
  switch (which) {
    case 0: return p->sp.unk_id();
    case 1: return p->sp.bos_id();
    case 2: return p->sp.eos_id();
    case 3: return p->sp.pad_id();
    default: return -1;
  }
}

LMSP_EXPORT void lmsp_free(void* ptr) { std::free(ptr); }
