#include "service/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <utility>

#include "dataecho/core/error.h"
#include "dataecho/formats/crc32c.h"
#include "dataecho/formats/tfrecord.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho::service {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw_error(ErrorCode::kIo, "journal", what + ": " + std::strerror(errno), path);
}

// The journal files of `dir` by number, in order.
std::vector<std::pair<int64_t, std::string>> journal_files(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> files;
  const std::regex name(R"(journal-(\d{6,})\.log)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(file, m, name))
      files.emplace_back(std::stoll(m[1]), entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string journal_name(int64_t number) {
  char name[32];
  std::snprintf(name, sizeof(name), "journal-%06lld.log", static_cast<long long>(number));
  return name;
}

// TFRecord's framing of one record.
std::string framed(const std::string& data) {
  std::string out(12, '\0');
  const uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(length >> (8 * i));
  auto put_crc = [&out](uint32_t crc) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
  };
  const uint32_t length_crc = crc32c::mask(crc32c::value(out.data(), 8));
  out.resize(8);
  put_crc(length_crc);
  out += data;
  put_crc(crc32c::mask(crc32c::value(data.data(), data.size())));
  return out;
}

void write_all(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_error("cannot write the journal", path);
    done += static_cast<size_t>(n);
  }
}

// Whether the file holds only zero bytes from `offset` to its end: where a file system
// had made room for a record it never wrote.
bool zeros_from(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  while (in.get(c))
    if (c != 0) return false;
  return true;
}

// Whether the file's first entry is a snapshot (the start of a compacted journal).
bool starts_with_snapshot(const std::string& path) {
  TfRecordReader reader(open_stream(path));
  std::shared_ptr<Buffer> record;
  JournalEntry entry;
  return reader.next(&record) == TfRecordReader::Status::kOk &&
         entry.ParseFromArray(record->data(), static_cast<int>(record->size())) &&
         entry.entry_case() == JournalEntry::kSnapshot;
}

}  // namespace

int64_t replay_journal(const std::string& path, DispatcherState& state,
                       std::vector<std::string>* warnings) {
  using Status = TfRecordReader::Status;
  const uint64_t size = fs::file_size(path);
  TfRecordReader reader(open_stream(path));
  std::shared_ptr<Buffer> record;
  const std::string of = " of " + std::to_string(size);
  int64_t applied = 0;
  for (;;) {
    const uint64_t at = reader.offset();
    const Status status = reader.next(&record);
    if (status == Status::kEnd) return applied;
    if (status == Status::kOk) {
      JournalEntry entry;
      if (!entry.ParseFromArray(record->data(), static_cast<int>(record->size())))
        throw_error(ErrorCode::kDataLoss, "journal",
                    "entry at byte " + std::to_string(at) + of + " is not a JournalEntry", path);
      try {
        state.apply(entry);
      } catch (const Error& e) {
        throw_error(ErrorCode::kDataLoss, "journal",
                    "entry at byte " + std::to_string(at) + of + ": " + e.message(), path);
      }
      ++applied;
      continue;
    }
    // The last record, cut or damaged by a process that stopped while writing it.
    if (status == Status::kTruncated ||
        (status == Status::kBadDataCrc && reader.next(&record) == Status::kEnd) ||
        (status == Status::kBadLengthCrc && zeros_from(path, at))) {
      if (warnings != nullptr)
        warnings->push_back(path + ": dropped a torn last record at byte " + std::to_string(at) +
                            of + " (the dispatcher stopped while writing it)");
      return applied;
    }
    throw_error(ErrorCode::kDataLoss, "journal",
                std::string(status == Status::kBadDataCrc ? "bad data CRC" : "bad length CRC") +
                    " at byte " + std::to_string(at) + of,
                path);
  }
}

Journal::Journal(const std::string& dir, DispatcherState& state, std::vector<std::string>* warnings,
                 uint64_t compact_bytes)
    : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_error(ErrorCode::kIo, "journal", "cannot create the folder: " + ec.message(), dir);
  const auto files = journal_files(dir);
  // From the newest snapshot: files before it were compacted into it (and are left only
  // when their removal was cut short).
  size_t first = 0;
  for (size_t i = files.size(); i-- > 0;)
    if (starts_with_snapshot(files[i].second)) {
      first = i;
      break;
    }
  uint64_t bytes = 0;
  for (size_t i = first; i < files.size(); ++i) {
    replayed_ += replay_journal(files[i].second, state, warnings);
    bytes += fs::file_size(files[i].second);
  }
  int64_t next = files.empty() ? 1 : files.back().first + 1;
  if (bytes > compact_bytes) {
    path_ = (fs::path(dir) / journal_name(next++)).string();
    append(state.snapshot());  // synced before the files it replaces go
    ::close(std::exchange(fd_, -1));
    for (const auto& file : files) fs::remove(file.second);
    compacted_ = true;
  }
  path_ = (fs::path(dir) / journal_name(next)).string();
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

void Journal::append(const JournalEntry& entry) {
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) io_error("cannot create the journal", path_);
    // The new file's name, durable before any entry in it is.
    const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }
  write_all(fd_, framed(entry.SerializeAsString()), path_);
  if (::fdatasync(fd_) != 0) io_error("cannot sync the journal", path_);
}

}  // namespace dataecho::service
