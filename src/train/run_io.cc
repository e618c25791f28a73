#include "run_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "dataecho/core/error.h"

namespace dataecho::train::run_io {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& message, const std::string& input) {
  throw Error(code, "train", message, input);
}

}  // namespace

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) fail(ErrorCode::kIo, "cannot write file", path.string());
}

void sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    fail(ErrorCode::kIo, "cannot sync to disk: " + why, path.string());
  }
  ::close(fd);
}

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(ErrorCode::kNotFound, "cannot open file", path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void publish_checkpoint(const fs::path& out, const std::function<void(const fs::path&)>& fill) {
  const fs::path tmp = out / "checkpoint.tmp", dir = out / "checkpoint",
                 old = out / "checkpoint.old";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  fill(tmp);
  for (const auto& f : fs::directory_iterator(tmp)) sync_path(f.path());
  sync_path(tmp);
  fs::remove_all(old);
  if (fs::exists(dir)) fs::rename(dir, old);
  fs::rename(tmp, dir);
  sync_path(out);
  fs::remove_all(old);
}

std::string model_bytes(ClassifierImpl& model) {
  torch::serialize::OutputArchive a;
  model.save(a);
  std::ostringstream s;
  a.save_to(s);
  return s.str();
}
void load_model_bytes(ClassifierImpl& model, const std::string& bytes) {
  torch::serialize::InputArchive a;
  std::istringstream s(bytes);
  a.load_from(s);
  model.load(a);
}

}  // namespace dataecho::train::run_io
