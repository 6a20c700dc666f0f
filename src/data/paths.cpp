#include "pitrain/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "pitrain/error.h"

namespace pitrain {
namespace {

// 0, or the errno of opening or syncing `path`.
int fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return errno;
  const int error = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return error;
}

std::string folder_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash + 1);
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

void check_output(const std::string& flag, const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (path.empty()) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(flag + " " + path + ": is a folder; give a file name in it (e.g. " + path +
                "/out.h5)");
  for (const auto& [input_flag, input] : inputs)
    if (path == input || same_file(path, input))
      throw Error(flag + " " + path + ": is the same file as " + input_flag + " " + input +
                  ", which writing it would destroy; write to another file");
  // A file of this check's own: can the folder take one?
  const std::string probe = temp_path_beside(path);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    throw Error(flag + " " + path +
                ": cannot write there; check that the folder exists and is writable");
  ::close(fd);
  std::remove(probe.c_str());
}

std::string temp_path_beside(const std::string& path) {
  std::random_device random;
  const uint64_t tag = (uint64_t(random()) << 32) ^ random();
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%016llx", long(::getpid()),
                (unsigned long long)tag);
  return path + suffix;
}

bool is_temp_name_of(const std::string& name, const std::string& path) {
  const std::string prefix = std::filesystem::path(path).filename().string() + ".tmp.";
  if (name.rfind(prefix, 0) != 0) return false;
  const std::string rest = name.substr(prefix.size());  // <pid>.<16 hex>
  const size_t dot = rest.find('.');
  auto all_of = [](const std::string& s, const char* set) {
    return !s.empty() && s.find_first_not_of(set) == std::string::npos;
  };
  return dot != std::string::npos && all_of(rest.substr(0, dot), "0123456789") &&
         rest.size() - dot - 1 == 16 && all_of(rest.substr(dot + 1), "0123456789abcdef");
}

void replace_durably(const std::string& tmp, const std::string& path, bool durable) {
  // A write the disk refused (EIO, a quota) shows here at the latest: then the old file stays.
  if (const int error = durable ? fsync_path(tmp) : 0) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write " + tmp + " to the disk (" + std::strerror(error) + "); " +
                path + " is left as it was; check the disk and its free space");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    throw Error(path + ": cannot replace (" + std::strerror(error) +
                "); check that the folder is writable");
  }
  if (durable) fsync_path(folder_of(path));  // the rename, where a folder can be synced
}

void write_beside(const std::string& path, const std::function<void(const std::string&)>& write) {
  const std::string tmp = temp_path_beside(path);
  const bool had = std::filesystem::exists(path);
  try {
    write(tmp);
  } catch (const Error& e) {
    std::remove(tmp.c_str());
    std::string message = e.what();
    for (size_t at; (at = message.find(tmp)) != std::string::npos;)
      message.replace(at, tmp.size(), path);
    throw Error(message + "; " + path + (had ? " is left as it was" : " is not written"));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  replace_durably(tmp, path);
}

void write_file_atomically(const std::string& path, std::string_view data, bool durable) {
  const std::string tmp = temp_path_beside(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool written = fd >= 0;
  for (size_t at = 0; written && at < data.size();) {
    const ssize_t n = ::write(fd, data.data() + at, data.size() - at);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    at += written ? size_t(n) : 0;
  }
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!written) {
    if (fd >= 0) std::remove(tmp.c_str());
    throw Error(path + ": cannot write " + tmp + " (" + std::strerror(error) +
                "); check that the folder is writable and has room");
  }
  replace_durably(tmp, path, durable);
}

}  // namespace pitrain
