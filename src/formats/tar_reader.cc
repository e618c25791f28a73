// TarReader (see dataecho/formats/tar.h): libarchive over a ByteStream.
#include <archive.h>
#include <archive_entry.h>

#include <cstring>

#include "dataecho/formats/tar.h"

namespace dataecho {
namespace {

constexpr size_t kTarChunk = 256 << 10;
constexpr int64_t kPreallocateLimit = 64 << 20;  // larger entries grow as they arrive

la_ssize_t read_trampoline(struct archive*, void* client, const void** buffer) {
  return static_cast<TarReader*>(client)->on_read(buffer);
}

}  // namespace

TarReader::TarReader(std::unique_ptr<ByteStream> stream)
    : stream_(std::move(stream)), chunk_(kTarChunk) {
  base_ = stream_->position();
  open();
}

TarReader::~TarReader() {
  if (archive_) archive_read_free(archive_);
}

long TarReader::on_read(const void** buffer) {
  try {
    size_t n = stream_->read(chunk_.data(), chunk_.size());
    *buffer = chunk_.data();
    return static_cast<long>(n);
  } catch (...) {
    stream_error_ = std::current_exception();  // rethrown once libarchive has returned
    archive_set_error(archive_, EIO, "stream read failed");
    return -1;
  }
}

void TarReader::open() {
  if (archive_) archive_read_free(archive_);
  archive_ = archive_read_new();
  archive_read_support_filter_all(archive_);
  archive_read_support_format_tar(archive_);
  archive_read_support_format_empty(archive_);
  at_end_ = corrupt_ = corrupt_reported_ = have_pending_ = compressed_ = false;
  compression_.clear();
  next_offset_ = base_;
  if (archive_read_open(archive_, this, nullptr, read_trampoline, nullptr) != ARCHIVE_OK) {
    if (stream_error_) std::rethrow_exception(std::exchange(stream_error_, nullptr));
    corrupt_ = true;
    corrupt_offset_ = base_;
    const char* msg = archive_error_string(archive_);
    error_ = std::string("not a readable tar archive: ") + (msg ? msg : "unknown format");
    return;
  }
  compressed_ = archive_filter_count(archive_) > 1;
  const char* filter = compressed_ ? archive_filter_name(archive_, 0) : nullptr;
  compression_ = filter ? filter : "";
}

void TarReader::seek_to(uint64_t offset) {
  stream_->seek(offset);
  base_ = offset;
  open();
}

uint64_t TarReader::bytes_from(uint64_t offset) {
  int64_t size = stream_->size();
  if (size < 0) {
    while (stream_->read(chunk_.data(), chunk_.size()) > 0) {
    }
    size = static_cast<int64_t>(stream_->position());
  }
  if (compressed()) {  // offsets are in the uncompressed archive: count the compressed rest
    return static_cast<uint64_t>(size) -
           std::min<uint64_t>(stream_->position(), static_cast<uint64_t>(size));
  }
  return static_cast<uint64_t>(size) > offset ? static_cast<uint64_t>(size) - offset : 0;
}

int64_t TarReader::resume_offset() const {
  if (compressed()) return -1;
  if (have_pending_) return static_cast<int64_t>(pending_offset_);
  return static_cast<int64_t>(next_offset_);
}

bool TarReader::fail(const char* what, uint64_t offset) {
  if (stream_error_) std::rethrow_exception(std::exchange(stream_error_, nullptr));
  corrupt_ = true;
  corrupt_offset_ = offset;
  const char* msg = archive_error_string(archive_);
  error_ = std::string("corrupt tar archive: ") + what + (msg ? std::string(": ") + msg : "");
  return false;
}

bool TarReader::read_entry() {
  if (corrupt_ || at_end_) return false;
  for (;;) {
    struct archive_entry* entry = nullptr;
    int r = archive_read_next_header(archive_, &entry);
    if (r == ARCHIVE_EOF) {
      at_end_ = true;
      return false;
    }
    if (r < ARCHIVE_WARN || r == ARCHIVE_RETRY) return fail("bad entry header", next_offset_);
    uint64_t header = base_ + static_cast<uint64_t>(archive_read_header_position(archive_));
    const auto type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) continue;
    const char* p = archive_entry_pathname(entry);
    std::string name = p ? p : "";
    // A link's data is not in the archive (a hard link's reads as empty): its sample is
    // a bad sample that names it, never a sample silently missing a field.
    std::string bad;
    if (type == AE_IFLNK) {
      const char* to = archive_entry_symlink(entry);
      bad = "tar entry '" + name + "' is a symbolic link (to '" + (to ? to : "?") +
            "'): only regular files are read";
    } else if (archive_entry_hardlink(entry) != nullptr) {
      bad = "tar entry '" + name + "' is a hard link (to '" + archive_entry_hardlink(entry) +
            "'): only regular files are read";
    } else if (type != AE_IFREG) {
      bad = "tar entry '" + name + "' is not a regular file: only regular files are read";
    }
    if (!bad.empty()) {
      set_pending(name, header, Buffer::allocate(0));
      pending_bad_ = std::move(bad);
      next_offset_ = header + 512;
      return true;
    }
    int64_t size = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : -1;
    std::shared_ptr<Buffer> data;
    if (size >= 0 && size <= kPreallocateLimit) {
      data = Buffer::allocate(static_cast<size_t>(size));
      size_t done = 0;
      while (done < static_cast<size_t>(size)) {
        la_ssize_t n = archive_read_data(archive_, data->mutable_data() + done,
                                         static_cast<size_t>(size) - done);
        if (n < 0) return fail(("cannot read the data of '" + name + "'").c_str(), header);
        if (n == 0) return fail(("truncated data of '" + name + "'").c_str(), header);
        done += static_cast<size_t>(n);
      }
    } else {
      std::string bytes;
      for (;;) {
        size_t old = bytes.size();
        bytes.resize(old + kTarChunk);
        la_ssize_t n = archive_read_data(archive_, bytes.data() + old, kTarChunk);
        if (n < 0) return fail(("cannot read the data of '" + name + "'").c_str(), header);
        bytes.resize(old + static_cast<size_t>(n));
        if (n == 0) break;
      }
      if (size >= 0 && static_cast<int64_t>(bytes.size()) != size) {
        return fail(("truncated data of '" + name + "'").c_str(), header);
      }
      data = Buffer::allocate(bytes.size());
      if (!bytes.empty()) std::memcpy(data->mutable_data(), bytes.data(), bytes.size());
    }
    set_pending(name, header, std::move(data));
    next_offset_ = header + 512 + ((data_size(pending_data_) + 511) / 512) * 512;
    return true;
  }
}

void TarReader::set_pending(const std::string& name, uint64_t header,
                            std::shared_ptr<Buffer> data) {
  size_t slash = name.rfind('/');
  size_t start = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = name.find('.', start);
  pending_key_ = dot == std::string::npos ? name : name.substr(0, dot);
  pending_ext_ = dot == std::string::npos ? "" : name.substr(dot + 1);
  pending_offset_ = header;
  pending_data_ = std::move(data);
  pending_bad_.clear();
  have_pending_ = true;
}

TarReader::Status TarReader::next(TarSample* sample) {
  if (!have_pending_ && !read_entry()) {
    if (corrupt_ && !corrupt_reported_) {
      corrupt_reported_ = true;
      return Status::kCorrupt;
    }
    return Status::kEnd;
  }
  sample->key = pending_key_;
  sample->offset = pending_offset_;
  sample->entries.clear();
  std::string bad;
  do {
    if (pending_ext_.empty() && bad.empty())
      bad = "tar entry '" + pending_key_ + "' has no extension";
    for (const auto& [ext, data] : sample->entries) {
      if (ext == pending_ext_ && bad.empty())
        bad = "duplicate tar entry '" + pending_key_ + "." + ext + "'";
    }
    if (!pending_bad_.empty()) {
      if (bad.empty()) bad = pending_bad_;
    } else {
      sample->entries.emplace_back(pending_ext_, std::move(pending_data_));
    }
    have_pending_ = false;
  } while (read_entry() && pending_key_ == sample->key);
  if (corrupt_) {
    // The sample may be missing entries that stood behind the corruption: never hand out
    // a partial sample; the loss starts at its first header.
    corrupt_reported_ = true;
    corrupt_offset_ = sample->offset;
    return Status::kCorrupt;
  }
  if (!bad.empty()) {
    error_ = bad;
    return Status::kBadSample;
  }
  return Status::kOk;
}

}  // namespace dataecho
