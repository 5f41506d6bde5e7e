// Filesystem helpers: whole-file read, crash-safe (atomic, fsynced) writes, directory fsync.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace lm::util {

namespace fs = std::filesystem;

/// Why `path` cannot be read, in the words that follow its name in a message.
struct ReadProblem {
  bool denied = false;  ///< it exists (or may) but permissions shut it off: not a missing path
  std::string what;     ///< "is missing (No such file or directory)", "cannot be read: permission denied", ...
  std::string hint;     ///< for a denied path, what to check ("Hint: ..."); empty otherwise
};

/// Nothing when `path` exists and may be read (a directory: listed and entered); else why not. Tells a missing
/// path from one that exists but is shut off: no read permission on it, or no search permission on a
/// directory above it (both are EACCES, which stat and open report as such).
std::optional<ReadProblem> read_problem(const fs::path& path);

/// Reads a whole file. Throws DataError naming `what` (e.g. "corpus") when it is missing or unreadable.
std::string read_file(const fs::path& path, std::string_view what = "file");

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one, never a mix:
/// write to a sibling temp file, fsync it, rename over `path`, fsync the directory. Throws SaveError.
void atomic_write_file(const fs::path& path, std::string_view bytes);

/// Writes `bytes` to a new file and fsyncs it (no rename). Throws SaveError.
void write_file_synced(const fs::path& path, std::string_view bytes);

/// fsyncs a directory so that renames and creations inside it are durable. Throws SaveError.
void fsync_dir(const fs::path& dir);

/// Throws ConfigError "[component] flag: expected a file in an existing directory, got ..." unless the
/// directory `out` would be written in exists: checked before the work whose result it will hold.
void check_output_directory(const fs::path& out, std::string_view component, std::string_view flag);

/// A unique suffix ("tmp-<pid>-<counter>-<host>") for temporary siblings of files and directories.
std::string temp_suffix();

/// Removes the temporary siblings in `dir` (NAME.tmp-<pid>-<counter>-<host>, temp_suffix()) whose NAME matches
/// the ECMAScript regex `name_regex` whole, written on this host by a process that is gone (a writer killed before it could clean up);
/// another host's (shared storage) and a live process's are kept. Returns how many were removed.
int remove_stale_temporaries(const fs::path& dir, const std::string& name_regex);

}  // namespace lm::util
