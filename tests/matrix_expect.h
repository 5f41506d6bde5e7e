// The bad-input and fault matrix: every message it expects, in one place. Each is an ECMAScript regex
// that must occur in the output of the case that uses it; changing a message of lmtrain means changing
// it here. The cases are in tests/matrix_*_test.cpp; docs/FAULT_MATRIX.md lists them all.
#pragma once

namespace lm::test::expect {

// Corpus and tokenizer (exit 3).
inline constexpr const char* kCorpusEmpty = R"(\[corpus\] '[^']*' holds no text: expected at least one non-blank line, got an empty file)";
inline constexpr const char* kCorpusBlank = R"(\[corpus\] '[^']*' holds no text: .* got \d+ bytes of whitespace)";
inline constexpr const char* kCorpusBadUtf8 = R"(\[corpus\] \S+:2:7: invalid UTF-8 \(byte 0xFF\): expected UTF-8 text)";
inline constexpr const char* kCorpusOverlong = R"(\[corpus\] \S+:1:3: invalid UTF-8 \(byte 0xC0\))";
inline constexpr const char* kCorpusSurrogate = R"(\[corpus\] \S+:1:1: invalid UTF-8 \(byte 0xED\))";
inline constexpr const char* kCorpusCutOff = R"(\[corpus\] \S+:2:4: invalid UTF-8 \(byte 0xE4, or a sequence cut off by the end\))";
inline constexpr const char* kCorpusNul = R"(\[corpus\] \S+:3:3: NUL byte: expected text)";
inline constexpr const char* kCorpusLongLine = R"(\[corpus\] \S+:2:1: line longer than 1048576 bytes: expected one unit)";
inline constexpr const char* kCorpusDirectory = R"(\[corpus\] training corpus directory '[^']*' holds no files \(names starting with '\.' are skipped\): expected at least one text file)";
inline constexpr const char* kCorpusFifo = R"(\[corpus\] training corpus '[^']*' is not a regular file \(a FIFO, socket or device\))";
inline constexpr const char* kCorpusUnreadable = R"(\[corpus\] training corpus '[^']*' cannot be read: permission denied\. Hint: check the permissions)";
inline constexpr const char* kConfigShut = R"(\[config\] config file '[^']*' cannot be read: permission denied \(a directory above it may not be searched\)\. Hint: check the permissions)";
inline constexpr const char* kCkptShut = R"(\[checkpoint\] '[^']*' cannot be read: permission denied\. Hint: check the permissions)";
inline constexpr const char* kCorpusDirShut = R"(\[corpus\] training corpus '[^']*' cannot be read: permission denied \(a directory above it may not be searched\)\. Hint: check the permissions)";
inline constexpr const char* kCorpusMissing = R"(\[corpus\] training corpus '[^']*' is missing \(No such file or directory\): expected a text file)";
inline constexpr const char* kVocabTooLarge = R"(\[tokenizer\] SentencePiece training failed for vocab_size=100000: .*Vocabulary size too high.*Hint: set --vocab-size to at most \d+, the largest '[^']*' supports)";
inline constexpr const char* kVocabBelowChars = R"(\[tokenizer\] SentencePiece training failed for vocab_size=8: .*Hint: raise --vocab-size or lower --character-coverage)";
inline constexpr const char* kTokenizerModelBad = R"(\[tokenizer\] cannot load '[^']*': )";
inline constexpr const char* kTokenizerModelEmpty = R"(\[tokenizer\] cannot load '[^']*': )";

// Config (exit 2).
inline constexpr const char* kUnknownKey = R"(unknown key 'train.batchsize' \([^)]*:5:\d+\)\. Did you mean 'train.batch_size'\?)";
inline constexpr const char* kUnknownSection = R"(unknown section 'trian' \([^)]*\)\. Did you mean 'train'\?)";
inline constexpr const char* kWrongType = R"(train.batch_size \([^)]*\): expected an integer, got 'four')";
inline constexpr const char* kZeroSize = R"(model.d_model \([^)]*\): expected a value in \[1, 65536\], got 0)";
inline constexpr const char* kNegativeSize = R"(train.max_steps \([^)]*\): expected a value in \[1, \d+\], got -5)";
inline constexpr const char* kFractionalInt = R"(train.batch_size \([^)]*\): expected an integer, got '2.5')";
inline constexpr const char* kYamlTab = R"(\[config\] \S+ is not valid YAML: yaml-cpp: error at line 3)";
inline constexpr const char* kYamlQuote = R"(\[config\] \S+ is not valid YAML: yaml-cpp: error at line \d+, column \d+: end of map flow not found)";
inline constexpr const char* kYamlIndent = R"(\[config\] \S+ is not valid YAML: yaml-cpp: error at line 3)";
inline constexpr const char* kYamlDeep = R"(\[config\] \S+ is nested too deeply: expected a map of sections with flat keys, got \d+ levels)";
inline constexpr const char* kConfigEmpty = R"(data.train: expected a path to a training text file, got nothing)";
inline constexpr const char* kConfigDirectory = R"(\[config\] config file '[^']*' is a directory: expected a YAML file)";
inline constexpr const char* kConfigNotMap = R"(expected a map of sections)";
inline constexpr const char* kDuplicateKey = R"(duplicate key 'train.lr' \([^)]*:5:\d+\): expected each key once, first at line 5)";
inline constexpr const char* kDuplicateSection = R"(duplicate key 'train' \([^)]*:6:1\): expected each key once, first at line 5)";
inline constexpr const char* kSetUnknown = R"(unknown key 'train.lrr' \(--set\)\. Did you mean 'train.lr'\?)";
inline constexpr const char* kSetNoEquals = R"(--set 'train.lr': expected section.key=value)";
inline constexpr const char* kLrHuge = R"(train.lr \(--set\): expected a value in \[1e-12, 10\], got 1e6)";

// Token files (exit 3).
inline constexpr const char* kTokenMagic = R"(token file '[^']*' has the wrong magic: expected LMTOKENS)";
inline constexpr const char* kTokenFuture = R"(token file '[^']*' has format version 9, expected 1 \(written by a newer lmtrain\))";
inline constexpr const char* kTokenTruncated = R"(token file '[^']*' is truncated or padded: its header says \d+ tokens, its size of \d+ bytes holds \d+)";
inline constexpr const char* kTokenCount = R"(token file '[^']*' is truncated or padded: its header says 18446744073709551615 tokens)";
inline constexpr const char* kTokenIdRange = R"(token file '[^']*' holds id 200 at position 5: expected ids below its vocab size 128)";
inline constexpr const char* kTokenWidth = R"(token file '[^']*' has id width 4 for vocab size 128: expected a vocab size >= 1 and width 2)";
inline constexpr const char* kTokenOtherTokenizer = R"(--tokens: expected a token file made with the tokenizer of .* \(another tokenizer\))";
inline constexpr const char* kTokenReencoded = R"(prepare: \S+ -> \S+train.bin \(\d+ tokens)";

// Checkpoints (exit 4 unless said).
inline constexpr const char* kCkptSize = R"(\[checkpoint\] size of \S+model.safetensors: expected \d+, got %SIZE%)";
inline constexpr const char* kCkptHash = R"(\[checkpoint\] SHA-256 of \S+%FILE% does not match the manifest)";
inline constexpr const char* kCkptManifestFlip = R"(\[checkpoint\] (SHA-256 of \S+ does not match the manifest|'[^']*manifest.json' is not valid JSON|manifest of '[^']*' (is malformed|names|does not list)|size of|file missing))";
inline constexpr const char* kCkptOutsidePath = R"(\[checkpoint\] manifest of '[^']*' names '%NAME%': expected a file name inside the checkpoint)";
inline constexpr const char* kCkptUnlisted = R"(\[checkpoint\] manifest of '[^']*' does not list arch.json)";
inline constexpr const char* kCkptNotADir = R"(\[checkpoint\] no checkpoint at '[^']*': expected a checkpoint directory \(with manifest.json\) or a run directory with `latest`, got a file)";
inline constexpr const char* kCkptOtherArch = R"(model.d_model: checkpoint 32 vs config 48)";
inline constexpr const char* kLatestMissing = R"(\[checkpoint\] no checkpoint at '[^']*': expected .*Hint: pass \S+step_00000004, the newest checkpoint there)";
inline constexpr const char* kLatestDeleted = R"(latest names 'step_00000004', which does not exist: using \S+step_00000002, the newest checkpoint there)";
inline constexpr const char* kLatestNoManifest = R"(latest names 'step_00000004', which has no manifest.json: using \S+step_00000002, the newest checkpoint there)";
inline constexpr const char* kLatestNothingLeft = R"(latest names 'step_00000004', which does not exist: expected a checkpoint directory, and \S+ holds no other checkpoint)";
inline constexpr const char* kLatestOutside = R"(latest names '\.\./elsewhere': expected the name of a checkpoint inside the run directory)";
inline constexpr const char* kResumeAutoFallback = R"(resume: skipping invalid checkpoint: \[checkpoint\] SHA-256 of \S+step_00000004/model.safetensors)";
inline constexpr const char* kResumeExplicitCorrupt = R"(\[checkpoint\] SHA-256 of \S+step_00000004/model.safetensors does not match the manifest)";

// Filesystem and processes.
inline constexpr const char* kRunDirReadOnly = R"(\[run\] cannot open the run lock '[^']*\.lock': Permission denied)";
inline constexpr const char* kSaveFailedGoesOn = R"(injected fault, test build\) \(no earlier checkpoint; training continues\))";
inline constexpr const char* kFinalSaveFailed = R"(\[checkpoint\] writing \S+ failed: No space left on device)";
inline constexpr const char* kNothingToDo = R"(nothing to do: \S+step_00000004 is at step 4 and train.max_steps is 4, and its final validation is recorded)";
inline constexpr const char* kResumedAfterKill = R"(resumed from \S+step_0000000\d)";
inline constexpr const char* kRunLocked = R"(\[run\] run.dir '[^']*' is in use: expected no other trainer, got process %PID% holding)";

// Signals.
inline constexpr const char* kStopDuringPrepare = R"(stopped by %SIG% during data preparation, before any step; no checkpoint was written)";
inline constexpr const char* kStopDuringFinalEval = R"(stopped by SIGINT during the final validation after step 4; saved \S+step_00000004 \(no final validation loss\))";
inline constexpr const char* kStopDuringSave = R"(stopped by SIGINT after step 2; saved \S+step_00000002)";
inline constexpr const char* kSecondSigint = R"(\[signal\] second SIGINT: leaving at once; an unfinished save stays a \*\.tmp-\* directory)";

// Numerics (exit 5).
inline constexpr const char* kNanLoss = R"(\[train\] non-finite value at step 3: loss nan, grad norm nan; no update was made\. Last valid checkpoint: \S+step_00000002)";
inline constexpr const char* kInfGrad = R"(\[train\] non-finite value at step 3: loss \d+\.\d+, grad norm inf; no update was made)";

// Sampling and inspection (exit 2 unless said).
inline constexpr const char* kEmptyPrompt = R"(next-token distribution after "" \(1 context tokens\))";
inline constexpr const char* kUnknownChars = R"(prompt: 3 characters the tokenizer does not know \(日 本\) become the unknown piece <unk> \(id 0\))";
inline constexpr const char* kTopPZero = R"(\[sample\] top-p: expected a value in \(0, 1\], got 0\b)";
inline constexpr const char* kTopPAbove = R"(\[sample\] top-p: expected a value in \(0, 1\], got 1\.50*)";
inline constexpr const char* kTopKNegative = R"(\[sample\] top-k: expected 0..128, got -1)";
inline constexpr const char* kTemperatureNegative = R"(\[sample\] temperature: expected >= 0, got -0\.50*)";
inline constexpr const char* kSeedNegative = R"(--seed: expected an integer in \[0, 2\^64\), got '-1')";
inline constexpr const char* kGenerateTooMany = R"(\[sample\] generate: expected 0..1000000 tokens, got 1000001)";
inline constexpr const char* kGenerateBeyondWindow = R"(sample 1 of 1: 80 tokens, stopped by length .*window slid \d+x)";
inline constexpr const char* kReportClobber = R"(\[report\] -o: refusing to overwrite '[^']*': it is not an lmtrain report)";
inline constexpr const char* kReportNoDir = R"(\[report\] -o: expected a file in an existing directory, got '[^']*' \(no directory '[^']*'\))";
inline constexpr const char* kReportOtherTokenizer = R"(\[report\] --compare: expected a checkpoint with the same tokenizer as )";
inline constexpr const char* kExtendLearned = R"(\[sample\] extend positions: expected a model with sinusoidal or rope positions)";

}  // namespace lm::test::expect
