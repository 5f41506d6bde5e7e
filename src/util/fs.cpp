#include "util/fs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "util/errors.h"

namespace lm::util {

std::optional<ReadProblem> read_problem(const fs::path& path) {
  struct stat st {};
  const bool found = ::stat(path.c_str(), &st) == 0;
  const int mode = found && S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK;
  if (found && ::access(path.c_str(), mode) == 0) return std::nullopt;
  const int err = errno;
  if (err == EACCES) {
    return ReadProblem{true, found ? "cannot be read: permission denied"
                             : "cannot be read: permission denied (a directory above it may not be searched)",
                       "Hint: check the permissions of the file and of every directory above it (`ls -ld` each), or "
                       "run as a user who may read them."};
  }
  if (err == ENOENT || err == ENOTDIR) return ReadProblem{false, std::string("is missing (") + std::strerror(err) + ")", ""};
  return ReadProblem{false, std::string("cannot be read (") + std::strerror(err) + ")", ""};
}

std::string read_file(const fs::path& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const auto p = read_problem(path);
    const std::string why = p ? p->what : std::string("cannot be opened (") + std::strerror(errno) + ")";
    throw DataError("[io] " + std::string(what) + " '" + path.string() + "' " + why + ": expected a readable file. " +
                    (p && p->denied ? p->hint : "Hint: check the path."));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_synced(const fs::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw SaveError("[io] cannot create '" + path.string() + "': " + std::strerror(errno));
  }
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      throw SaveError("[io] write to '" + path.string() + "' failed: " + std::strerror(e));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd) == 0;
  if (!synced || !closed) {
    throw SaveError("[io] fsync/close of '" + path.string() + "' failed: " + std::strerror(synced ? errno : sync_errno));
  }
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw SaveError("[io] cannot open directory '" + dir.string() + "': " + std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw SaveError("[io] fsync of directory '" + dir.string() + "' failed");
}

namespace {

// This machine's name as temporary names carry it (letters, digits, '.', '_' and '-' kept; others '_').
const std::string& host_tag() {
  static const std::string tag = [] {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return std::string("host");
    std::string t(buf);
    for (char& c : t) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
    }
    return t;
  }();
  return tag;
}

}  // namespace

std::string temp_suffix() {
  static std::atomic<uint64_t> counter{0};
  return "tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + host_tag();
}

int remove_stale_temporaries(const fs::path& dir, const std::string& name_regex) {
  const std::regex name(name_regex);
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    std::smatch m;
    // NAME.tmp-<pid>-<counter>-<host>: only this host's, only a process that is gone
    static const std::regex suffix(R"(^(.*)\.tmp-(\d+)-\d+-(.+)$)");
    if (!std::regex_match(file, m, suffix) || !std::regex_match(m[1].str(), name) || m[3].str() != host_tag()) continue;
    const long pid = std::strtol(m[2].str().c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

void check_output_directory(const fs::path& out, std::string_view component, std::string_view flag) {
  if (out.parent_path().empty() || fs::is_directory(out.parent_path())) return;
  throw ConfigError("[" + std::string(component) + "] " + std::string(flag) + ": expected a file in an existing directory, got '" +
                    out.string() + "' (no directory '" + out.parent_path().string() + "'). Hint: create it first.");
}

void atomic_write_file(const fs::path& path, std::string_view bytes) {
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  fs::path tmp = dir / (path.filename().string() + "." + temp_suffix());
  try {
    write_file_synced(tmp, bytes);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw SaveError("[io] rename to '" + path.string() + "' failed: " + ec.message());
  }
  fsync_dir(dir);
}

}  // namespace lm::util
