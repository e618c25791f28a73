// The `files` source (dataecho/formats/files.h): a dataset over a strided view of a
// listing, and its reader, `reads_in_flight` threads reading files ahead of the consumer
// into a ring of 2 x reads_in_flight slots.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "bad_records.h"
#include "dataecho/core/cpu_affinity.h"
#include "dataecho/formats/files.h"

namespace dataecho {
namespace {

struct FilesShared {
  std::shared_ptr<const FileListing> listing;
  OnError on_error = OnError::kFail;
  StreamOptions stream;
  int64_t reads_in_flight = 8;
  bool path_field = false;
};

// Positions start, start + stride, ... of the listing.
struct View {
  uint64_t start = 0, stride = 1;
  uint64_t count(uint64_t n) const { return start >= n ? 0 : (n - start + stride - 1) / stride; }
  uint64_t at(uint64_t k) const { return start + k * stride; }
};

// One file's bytes, or why they could not be read.
struct FileRead {
  std::shared_ptr<Buffer> bytes;
  std::string error;
};

FileRead read_local(const std::string& path, int64_t listed) {
  FileRead r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    r.error = err == ENOENT ? "the file is missing (gone since the listing?)"
                            : std::string("cannot open the file: ") + std::strerror(err);
    return r;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    r.error = S_ISDIR(st.st_mode) ? "is a folder" : std::string("cannot stat: ") + strerror(errno);
  } else if (listed >= 0 && st.st_size != listed) {
    r.error = "the file has " + std::to_string(st.st_size) + " bytes, " + std::to_string(listed) +
              " when it was listed";
  } else {
    const size_t size = static_cast<size_t>(st.st_size);
    auto buf = Buffer::allocate(size);
    size_t got = 0;
    while (got < size) {
      ssize_t n = ::read(fd, buf->mutable_data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got == size) {
      r.bytes = std::move(buf);
    } else {
      r.error = "the file ended after " + std::to_string(got) + " of " + std::to_string(size) +
                " bytes while it was read";
    }
  }
  ::close(fd);
  return r;
}

FileRead read_remote(const std::string& url, const StreamOptions& so) {
  FileRead r;
  try {
    auto stream = open_stream(url, so);
    auto* data = new std::string();
    std::unique_ptr<std::string> owner(data);
    char buf[64 << 10];
    while (size_t n = stream->read(buf, sizeof(buf))) data->append(buf, n);
    r.bytes = Buffer::wrap(reinterpret_cast<std::byte*>(data->data()), data->size(),
                           [data] { delete data; });
    owner.release();
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// Never throws (it runs on the reader threads): a failure is the read's error.
FileRead read_file(const FilesShared& sh, uint64_t i) noexcept {
  try {
    const std::string path = sh.listing->full_path(i);
    if (is_remote_uri(path)) return read_remote(path, sh.stream);
    return read_local(path, sh.listing->file_size(i));
  } catch (const std::exception& e) {  // std::bad_alloc for a huge file
    return {nullptr, e.what()};
  } catch (...) {
    return {nullptr, "unknown error"};
  }
}

// `threads` readers claim view positions in order while they are fewer than `window`
// ahead of the consumer; take(k) waits for position k.
class ParallelReads {
 public:
  ParallelReads(std::shared_ptr<const FilesShared> sh, View view, uint64_t from, uint64_t end,
                const std::shared_ptr<CancellationToken>& token)
      : sh_(std::move(sh)),
        view_(view),
        window_(static_cast<uint64_t>(2 * sh_->reads_in_flight)),
        slots_(window_),
        next_claim_(from),
        next_take_(from),
        end_(end) {
    registration_ = token->on_cancel([this] { stop(); });
    const uint64_t threads =
        std::min<uint64_t>(static_cast<uint64_t>(sh_->reads_in_flight), end - from);
    for (uint64_t t = 0; t < threads; ++t)
      threads_.push_back(start_engine_thread([this] { run(); }));
  }
  ~ParallelReads() {
    registration_.reset();
    stop();
    for (auto& t : threads_) t.join();
  }
  ParallelReads(const ParallelReads&) = delete;
  ParallelReads& operator=(const ParallelReads&) = delete;

  // Position k's read (k: the next position in order); false once stopped (cancelled).
  bool take(uint64_t k, FileRead& out) {
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return stop_ || slots_[k % window_].has_value(); });
    if (stop_) return false;
    out = std::move(*slots_[k % window_]);
    slots_[k % window_].reset();
    next_take_ = k + 1;
    lk.unlock();
    work_cv_.notify_one();
    return true;
  }

 private:
  void stop() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    done_cv_.notify_all();
  }
  void run() {
    std::unique_lock lk(mu_);
    for (;;) {
      work_cv_.wait(
          lk, [&] { return stop_ || (next_claim_ < end_ && next_claim_ < next_take_ + window_); });
      if (stop_) return;
      const uint64_t k = next_claim_++;
      lk.unlock();
      FileRead r = read_file(*sh_, view_.at(k));
      lk.lock();
      slots_[k % window_] = std::move(r);
      if (k == next_take_) done_cv_.notify_one();
    }
  }

  std::shared_ptr<const FilesShared> sh_;
  View view_;
  const uint64_t window_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::optional<FileRead>> slots_;  // position k in slot k % window_
  uint64_t next_claim_, next_take_, end_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  CancellationToken::Registration registration_;
};

// The view's positions [begin, end) (a record range; the whole view by default).
class FilesDataset : public Dataset {
 public:
  FilesDataset(std::shared_ptr<const FilesShared> sh, View view, uint64_t begin = 0,
               uint64_t end = UINT64_MAX)
      : sh_(std::move(sh)),
        view_(view),
        begin_(begin),
        end_(std::min(end, view.count(sh_->listing->size()))) {}
  std::string op_name() const override { return "files"; }
  bool owns_threads() const override { return sh_->reads_in_flight > 1; }
  // A record range has neither (it is a piece of a split already).
  std::vector<DatasetPtr> shards() const override {
    if (ranged()) return {};
    const uint64_t k = std::min<uint64_t>(64, view_.count(sh_->listing->size()));
    std::vector<DatasetPtr> out;
    for (uint64_t j = 0; j < k; ++j) out.push_back(part(j, k));
    return out;
  }
  DatasetPtr shard_of(int64_t num_shards, int64_t index) const override {
    if (ranged()) return nullptr;
    return part(static_cast<uint64_t>(index), static_cast<uint64_t>(num_shards));
  }
  std::string not_seekable_reason() const override { return ""; }
  std::vector<ShardIndex> record_index() const override {
    ShardIndex ix;
    ix.uri = sh_->listing->root();
    ix.records = static_cast<int64_t>(end_ - begin_);
    return {ix};
  }
  DatasetPtr record_range(const RecordRange& r) const override {
    check_record_range(label(), r, 1, static_cast<int64_t>(end_ - begin_), sh_->listing->root());
    auto d = std::make_shared<FilesDataset>(sh_, view_, begin_ + static_cast<uint64_t>(r.begin),
                                            begin_ + static_cast<uint64_t>(r.end));
    if (node_stats()) d->attach(label(), node_stats());
    return d;
  }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override {
    return std::make_unique<It>(this, ctx);
  }

 private:
  // Every n-th element of this view from its j-th on, under this node's label and stats.
  DatasetPtr part(uint64_t j, uint64_t n) const {
    auto d = std::make_shared<FilesDataset>(sh_, View{view_.at(j), view_.stride * n});
    if (node_stats()) d->attach(label(), node_stats());
    return d;
  }

  bool ranged() const { return begin_ > 0 || end_ < view_.count(sh_->listing->size()); }

  class It : public Iterator {
   public:
    It(const FilesDataset* ds, const IteratorContext& ctx)
        : ds_(ds),
          token_(ctx.cancel),
          pos_(ds->begin_),
          end_(ds->end_),
          bad_("files", ds->sh_->listing->root(), ds->sh_->on_error) {}

    void save(StateWriter& w) override {
      const FileListing& l = *ds_->sh_->listing;
      w.begin("files");
      w.write_u64(l.hash());
      w.write_u64(l.size());
      w.write_u64(ds_->view_.start);
      w.write_u64(ds_->view_.stride);
      w.write_u64(pos_);
      bad_.save(w);
    }
    void restore(StateReader& r) override;

   protected:
    std::optional<Example> next_impl() override;

   private:
    Example make_example(uint64_t i, std::shared_ptr<Buffer> bytes) const;

    const FilesDataset* ds_;
    std::shared_ptr<CancellationToken> token_;
    uint64_t pos_;
    const uint64_t end_;
    BadRecords bad_;
    std::unique_ptr<ParallelReads> reads_;
  };

  std::shared_ptr<const FilesShared> sh_;
  View view_;
  uint64_t begin_, end_;
};

void FilesDataset::It::restore(StateReader& r) {
  const FileListing& l = *ds_->sh_->listing;
  r.expect("files");
  const uint64_t hash = r.read_u64(), n = r.read_u64();
  if (hash != l.hash() || n != l.size()) {
    char h[2][24];
    std::snprintf(h[0], sizeof h[0], "%016llx", static_cast<unsigned long long>(hash));
    std::snprintf(h[1], sizeof h[1], "%016llx", static_cast<unsigned long long>(l.hash()));
    throw_error(ErrorCode::kInvalidArgument, label(),
                "the listing changed since the state was saved: " + std::to_string(l.size()) +
                    " files now (listing hash " + h[1] + "), " + std::to_string(n) +
                    " then (hash " + h[0] +
                    "); positions would not name the same files, so the state is refused",
                l.root());
  }
  const uint64_t start = r.read_u64(), stride = r.read_u64();
  if (start != ds_->view_.start || stride != ds_->view_.stride)
    throw_error(ErrorCode::kInvalidArgument, label(), "the saved state is of another shard");
  const uint64_t pos = r.read_u64();
  if (pos < ds_->begin_ || pos > end_)
    throw_error(ErrorCode::kInvalidArgument, label(), "saved position out of range");
  reads_.reset();
  pos_ = pos;
  bad_.restore(r);
}

std::optional<Example> FilesDataset::It::next_impl() {
  const FilesShared& sh = *ds_->sh_;
  while (pos_ < end_) {
    const uint64_t k = pos_;
    const uint64_t i = ds_->view_.at(k);
    FileRead r;
    if (sh.reads_in_flight <= 1) {
      r = read_file(sh, i);
    } else {
      if (!reads_) reads_ = std::make_unique<ParallelReads>(ds_->sh_, ds_->view_, k, end_, token_);
      if (!reads_->take(k, r)) throw_error(ErrorCode::kCancelled, label(), "pipeline cancelled");
    }
    ++pos_;
    if (r.bytes) {
      Example e = make_example(i, std::move(r.bytes));
      bad_.good(e);
      return e;
    }
    const std::string where = sh.listing->full_path(i) + " (file " + std::to_string(i) + ")";
    if (auto rep = bad_.bad_file(stats(), label(), r.error, where)) return rep;
  }
  reads_.reset();
  bad_.finish();
  return std::nullopt;
}

Example FilesDataset::It::make_example(uint64_t i, std::shared_ptr<Buffer> bytes) const {
  const FileListing& l = *ds_->sh_->listing;
  Example e(static_cast<int64_t>(i));
  const int64_t n = static_cast<int64_t>(bytes->size());
  e.set("image", Tensor(DType::kUInt8, {n}, std::move(bytes)));
  if (l.has_labels()) e.set("label", Tensor::scalar<int64_t>(l.label(i)));
  if (ds_->sh_->path_field) e.set("path", Tensor::from_bytes(std::string(l.path(i))));
  for (size_t c = 0; c < l.columns().size(); ++c)
    e.set(l.columns()[c], Tensor::from_bytes(l.cell(i, c)));
  return e;
}

}  // namespace

DatasetPtr make_files_source(const FilesOptions& o) {
  if (o.reads_in_flight < 1 || o.reads_in_flight > 1024)
    throw_error(ErrorCode::kInvalidArgument, "files",
                "reads_in_flight must be in [1, 1024], got " + std::to_string(o.reads_in_flight));
  auto sh = std::make_shared<FilesShared>();
  sh->listing = FileListing::make(o);
  for (const auto& c : sh->listing->columns()) {
    if (c == "image" || c == "label" || c.empty())
      throw_error(ErrorCode::kInvalidArgument, "files",
                  "a further column of the list is named '" + c +
                      "': the names image and label are the file's bytes and its label",
                  o.list);
    if (c == "path" && o.path_field)
      throw_error(ErrorCode::kInvalidArgument, "files",
                  "a further column of the list is named 'path', the name \"path\": true gives "
                  "the file's path: rename the column or leave \"path\" out",
                  o.list);
  }
  sh->path_field = o.path_field;
  sh->on_error = o.on_error;
  sh->stream = o.stream;
  sh->stream.buffer_bytes = std::min<size_t>(sh->stream.buffer_bytes, 256 << 10);
  sh->reads_in_flight = o.reads_in_flight;
  return std::make_shared<FilesDataset>(std::move(sh), View{});
}

}  // namespace dataecho
