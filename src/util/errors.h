// Typed exceptions thrown by library code; cli/ is the only place that catches them and maps each kind to
// its documented exit code (docs/ARCHITECTURE.md "Errors and exit codes"). Messages follow
// "[component] what failed: expected X, got Y. Hint: ...".
#pragma once

#include <stdexcept>
#include <string>

namespace lm {

/// Process exit codes, one per failure kind. Documented in docs/errors.md "Exit codes".
enum class ExitCode : int {
  kOk = 0,
  kInternal = 1,
  kUsage = 2,        ///< bad command line or config
  kData = 3,         ///< corpus, token file or tokenizer problem
  kCheckpoint = 4,   ///< missing, corrupt or incompatible checkpoint
  kNonFinite = 5,    ///< NaN/Inf loss or gradient
  kSave = 6,         ///< a checkpoint or output could not be written
  kDistributed = 7,  ///< multi-process training: a rank was lost, never joined, or the replicas diverged
  kSigInt = 130,
  kSigTerm = 143,
};

/// Base of every lmtrain error; carries the exit code that cli/ returns for it.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

/// Bad config value, unknown key, or invalid command-line combination (exit 2).
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& m) : Error(ExitCode::kUsage, m) {}
};

/// Corpus, token file or tokenizer problem (exit 3).
class DataError : public Error {
 public:
  explicit DataError(const std::string& m) : Error(ExitCode::kData, m) {}
};

/// Checkpoint missing, failing verification, or incompatible with the model (exit 4).
class CheckpointError : public Error {
 public:
  explicit CheckpointError(const std::string& m) : Error(ExitCode::kCheckpoint, m) {}
};

/// Loss or gradient norm became NaN/Inf (exit 5).
class NonFiniteError : public Error {
 public:
  explicit NonFiniteError(const std::string& m) : Error(ExitCode::kNonFinite, m) {}
};

/// Writing a checkpoint or output file failed (exit 6).
class SaveError : public Error {
 public:
  explicit SaveError(const std::string& m) : Error(ExitCode::kSave, m) {}
};

/// A rank of a multi-process run was lost or never joined, or the ranks disagree (exit 7).
class DistributedError : public Error {
 public:
  explicit DistributedError(const std::string& m) : Error(ExitCode::kDistributed, m) {}
};

/// A run stopped by SIGINT/SIGTERM after saving (exit 130/143). Not a failure of the program.
class Interrupted : public Error {
 public:
  Interrupted(ExitCode code, const std::string& m) : Error(code, m) {}
};

/// Throws the typed exception of `code` (ConfigError for kUsage, SaveError for kSave, ...) with message `m`:
/// how another rank's failure, received as (code, text), is raised again here.
[[noreturn]] inline void throw_error(ExitCode code, const std::string& m) {
  switch (code) {
    case ExitCode::kUsage: throw ConfigError(m);
    case ExitCode::kData: throw DataError(m);
    case ExitCode::kCheckpoint: throw CheckpointError(m);
    case ExitCode::kNonFinite: throw NonFiniteError(m);
    case ExitCode::kSave: throw SaveError(m);
    case ExitCode::kDistributed: throw DistributedError(m);
    case ExitCode::kSigInt:
    case ExitCode::kSigTerm: throw Interrupted(code, m);
    default: throw Error(code, m);
  }
}

}  // namespace lm
