// C ABI of the SentencePiece bridge library (liblmtrain_spbridge.so). It is the only code that links
// Debian's libsentencepiece, whose bundled protobuf 3.14 clashes with LibTorch's protobuf 3.21 in one
// process (docs/ARCHITECTURE.md "The SentencePiece bridge"). tokenizer.cpp dlopens it with
// RTLD_LOCAL | RTLD_DEEPBIND.
//
// Conventions: functions return 0 on success. On failure they return non-zero and, when `err` is not
// null, store a malloc'd message there that the caller frees with lmsp_free. Output buffers are malloc'd
// by the bridge and freed with lmsp_free.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmsp_processor lmsp_processor;

/// Trains a model from `n` key/value pairs of SentencePiece trainer flags (e.g. "input", "vocab_size").
int lmsp_train(const char* const* keys, const char* const* values, size_t n, char** err);

/// Loads a serialized model file.
int lmsp_load(const char* model_path, lmsp_processor** out, char** err);

/// Releases a processor from lmsp_load.
void lmsp_unload(lmsp_processor* p);

/// Encodes UTF-8 text to piece ids; *ids is malloc'd with *n entries.
int lmsp_encode(lmsp_processor* p, const char* text, size_t len, int32_t** ids, size_t* n, char** err);

/// Decodes ids to UTF-8 text; *text is malloc'd and NUL-terminated, *len excludes the NUL.
int lmsp_decode(lmsp_processor* p, const int32_t* ids, size_t n, char** text, size_t* len, char** err);

/// Vocabulary size of the loaded model.
int32_t lmsp_vocab_size(lmsp_processor* p);

/// Piece string of `id` (malloc'd, NUL-terminated); returns non-zero for an out-of-range id.
int lmsp_id_to_piece(lmsp_processor* p, int32_t id, char** piece);

/// Id of `piece`, or the unknown id when absent.
int32_t lmsp_piece_to_id(lmsp_processor* p, const char* piece);

/// Special ids (-1 when disabled): which = 0 unk, 1 bos, 2 eos, 3 pad.
int32_t lmsp_special_id(lmsp_processor* p, int which);

/// Frees memory returned by the bridge.
void lmsp_free(void* ptr);

#ifdef __cplusplus
}
#endif
