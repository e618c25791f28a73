#include "dataecho/ops/cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <vector>

#include "dataecho/core/error.h"
#include "dataecho/core/state.h"
#include "dataecho/core/stats.h"

namespace dataecho {
namespace {

constexpr char kMagic[8] = {'D', 'E', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr uint64_t kEndMark = ~uint64_t{0};
constexpr size_t kIoBuffer = 1 << 20;

[[noreturn]] void cache_error(ErrorCode code, const std::string& message,
                              const std::string& input = "") {
  throw_error(code, "cache", message, input);
}

std::string errno_text() { return std::strerror(errno); }

// ---------------------------------------------------------------- the file
// header: magic, key; records: u64 length, an Example as StateWriter writes it; end:
// u64 ~0, u64 record count, magic.
class CacheWriter {
 public:
  CacheWriter(std::string final_path, const std::string& key) : final_(std::move(final_path)) {
    std::random_device rd;
    temp_ = final_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    f_ = std::fopen(temp_.c_str(), "wb");
    if (!f_)
      cache_error(ErrorCode::kNotFound, temp_ + ": cannot create the cache file: " + errno_text());
    std::setvbuf(f_, nullptr, _IOFBF, kIoBuffer);
    put(kMagic, sizeof kMagic);
    put_u64(key.size());
    put(key.data(), key.size());
  }
  ~CacheWriter() {
    if (f_) std::fclose(f_);
    if (!done_) std::remove(temp_.c_str());  // an interrupted pass leaves nothing
  }
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;

  void add(const Example& e) {
    StateWriter w;
    w.write_example(e);
    put_u64(w.data().size());
    put(w.data().data(), w.data().size());
    ++count_;
  }
  // Writes the end and renames the file into place: from now on it is the cache.
  void finish() {
    put_u64(kEndMark);
    put_u64(count_);
    put(kMagic, sizeof kMagic);
    if (std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0)
      cache_error(ErrorCode::kInternal, temp_ + ": cannot write the cache file: " + errno_text());
    std::fclose(f_);
    f_ = nullptr;
    if (std::rename(temp_.c_str(), final_.c_str()) != 0)
      cache_error(ErrorCode::kInternal,
                  final_ + ": cannot rename the finished cache into place: " + errno_text());
    done_ = true;
  }

 private:
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n)
      cache_error(ErrorCode::kInternal, temp_ + ": cannot write the cache file: " + errno_text());
  }
  void put_u64(uint64_t v) { put(&v, sizeof v); }

  std::string final_, temp_;
  std::FILE* f_ = nullptr;
  int64_t count_ = 0;
  bool done_ = false;
};

// Reads the file in chunks of 1 MiB (more for a larger record); a record's tensors are
// views of its chunk, as a TFRecord source's records are of theirs.
class CacheReader {
 public:
  CacheReader(std::string path, const std::string& key) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      cache_error(ErrorCode::kNotFound, path_ + ": cannot open the cache file: " + errno_text());
    char magic[sizeof kMagic];
    get(magic, sizeof magic, "its header");
    const uint64_t n = get_u64("its header");
    if (n >= 4096 || std::memcmp(magic, kMagic, sizeof kMagic) != 0)
      cache_error(ErrorCode::kDataLoss, path_ + ": not a dataecho cache file (bad header)");
    std::string stored(n, '\0');
    get(stored.data(), n, "its header");
    if (stored != key)
      cache_error(ErrorCode::kDataLoss, path_ + ": the cache file was written for key \"" + stored +
                                            "\", not \"" + key + "\"");
  }
  ~CacheReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  CacheReader(const CacheReader&) = delete;
  CacheReader& operator=(const CacheReader&) = delete;

  // The next record, or nullopt after the end (checked: the count the writer wrote).
  std::optional<Example> next() {
    const uint64_t n = get_u64(nullptr);
    if (n == kEndMark) {
      const uint64_t count = get_u64("its end");
      char magic[sizeof kMagic];
      get(magic, sizeof magic, "its end");
      if (count != index_ || std::memcmp(magic, kMagic, sizeof kMagic) != 0)
        cache_error(ErrorCode::kDataLoss, path_ + ": the cache file's end says " +
                                              std::to_string(count) + " records, but it holds " +
                                              std::to_string(index_));
      return std::nullopt;
    }
    if (n > (uint64_t{1} << 40))
      cache_error(ErrorCode::kDataLoss, path_ + ": bad record length", where(nullptr));
    const size_t at = ensure(n, nullptr);
    pos_ += n;
    ++index_;
    try {
      return StateReader(chunk_, at, n).read_example();
    } catch (const Error& e) {
      cache_error(ErrorCode::kDataLoss, path_ + ": " + e.what(), where(nullptr));
    }
  }
  // Skips `count` records without decoding them.
  void skip(uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t n = get_u64(nullptr);
      if (n == kEndMark)
        cache_error(ErrorCode::kDataLoss, path_ + ": fewer records than the saved position",
                    where(nullptr));
      pos_ = ensure(n, nullptr) + n;
      ++index_;
    }
  }

 private:
  // Makes the next n bytes contiguous in chunk_ (a new chunk holds what was left of the
  // old one and as much more of the file as fits) and returns their offset.
  // Where in the file, for errors: `part` ("its header"), or null: the current record.
  std::string where(const char* part) const {
    return part ? std::string(part) : "record " + std::to_string(index_);
  }
  size_t ensure(size_t n, const char* part) {
    if (end_ - pos_ >= n) return pos_;
    const size_t cap = std::max(kIoBuffer, n);
    size_t filled = end_ - pos_;
    // The chunk again when no element holds a view of it any more (the usual case when
    // elements are consumed as they come): no allocation, no fresh pages to fault in.
    std::shared_ptr<Buffer> fresh = chunk_;
    if (fresh && fresh.use_count() == 2 && fresh->size() >= cap) {
      std::memmove(fresh->mutable_data(), fresh->data() + pos_, filled);
    } else {
      fresh = Buffer::allocate(cap);
      if (filled) std::memcpy(fresh->mutable_data(), chunk_->data() + pos_, filled);
    }
    while (filled < cap) {
      const ssize_t r = ::read(fd_, fresh->mutable_data() + filled, cap - filled);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0)
        cache_error(ErrorCode::kIo, path_ + ": cannot read the cache file: " + errno_text(),
                    where(part));
      if (r == 0) break;
      filled += static_cast<size_t>(r);
    }
    if (filled < n)
      cache_error(ErrorCode::kDataLoss, path_ + ": the cache file is truncated", where(part));
    chunk_ = std::move(fresh);
    pos_ = 0;
    end_ = filled;
    return 0;
  }
  void get(void* p, size_t n, const char* part) {
    const size_t at = ensure(n, part);
    std::memcpy(p, chunk_->data() + at, n);
    pos_ = at + n;
  }
  uint64_t get_u64(const char* part) {
    uint64_t v = 0;
    get(&v, sizeof v, part);
    return v;
  }

  std::string path_;
  int fd_ = -1;
  std::shared_ptr<Buffer> chunk_;
  size_t pos_ = 0, end_ = 0;
  uint64_t index_ = 0;
};

// ---------------------------------------------------------------- the dataset
// What the passes of one cache share.
struct CacheState {
  std::mutex mu;
  bool filling = false;   // an iterator is filling the cache
  bool complete = false;  // memory: `data` holds the first pass (or its prefix)
  std::vector<Example> data;
  int64_t bytes = 0;
  std::string tail_state;  // prefix: the input's state after the last cached element
  int64_t fill_epoch = 0;  // the context epoch of the pass that filled it
  // The epoch of a first pass that was restored into the middle of its filling (it
  // fills nothing): the pass that fills instead reads that epoch, so that the cache
  // holds what the first pass produced, as without the restore.
  std::optional<int64_t> first_epoch;
};

enum class Mode : uint64_t { kUndecided, kFill, kPassThrough, kMemory, kTail, kDisk };

class CacheDataset : public Dataset {
 public:
  CacheDataset(DatasetPtr input, CacheOptions o) : input_(std::move(input)), o_(std::move(o)) {}
  std::string op_name() const override { return "cache"; }
  const DatasetPtr& input() const { return input_; }
  const CacheOptions& options() const { return o_; }
  CacheState& state() const { return *state_; }

 protected:
  std::unique_ptr<Iterator> make_iterator_impl(const IteratorContext& ctx) const override;

 private:
  DatasetPtr input_;
  CacheOptions o_;
  std::shared_ptr<CacheState> state_ = std::make_shared<CacheState>();
};

class CacheIterator : public Iterator {
 public:
  CacheIterator(const CacheDataset& ds, const IteratorContext& ctx) : ds_(ds), ctx_(ctx) {}
  ~CacheIterator() override {
    flush_counts();
    release_fill();
  }

  void save(StateWriter& w) override {
    flush_counts();
    w.begin("cache");
    w.write_u64(static_cast<uint64_t>(mode_));
    w.write_i64(position_);
    w.write_i64(fill_epoch_);
    w.write_bool(in_ != nullptr);
    if (in_) in_->save(w);
  }
  void restore(StateReader& r) override;

 protected:
  std::optional<Example> next_impl() override;

 private:
  void decide();
  std::optional<Example> fill();
  void keep_in_memory(const Example& e);
  void finish_fill();
  void release_fill();
  void open_input(int64_t epoch) {
    IteratorContext c = ctx_;
    c.epoch = epoch;
    in_ = ds_.input()->make_iterator(c);
  }
  std::optional<Example> from_memory();
  void refill_memory();
  // Hits and misses are counted here and added to the node's counters every
  // kCountBatch elements, at the end of a pass, on save and on destruction: an atomic
  // add per element costs a tenth of a memory hit's time for small elements.
  static constexpr int64_t kCountBatch = 1024;
  std::optional<Example> counted(std::optional<Example> e, bool hit) {
    if (e) ++(hit ? pending_hits_ : pending_misses_);
    if (!e || pending_hits_ + pending_misses_ >= kCountBatch) flush_counts();
    return e;
  }
  void flush_counts() {
    if (stats() && (pending_hits_ > 0 || pending_misses_ > 0)) {
      if (!hits_) {
        hits_ = &stats()->counter("hits");
        misses_ = &stats()->counter("misses");
      }
      if (pending_hits_ > 0) *hits_ += pending_hits_;
      if (pending_misses_ > 0) *misses_ += pending_misses_;
    }
    pending_hits_ = pending_misses_ = 0;
  }

  const CacheDataset& ds_;
  IteratorContext ctx_;
  Mode mode_ = Mode::kUndecided;
  int64_t position_ = 0;  // elements this pass has produced
  int64_t fill_epoch_ = 0;
  std::unique_ptr<Iterator> in_;
  std::unique_ptr<CacheWriter> writer_;
  std::unique_ptr<CacheReader> reader_;
  std::vector<Example> filled_;  // memory: this pass's elements so far
  int64_t filled_bytes_ = 0;
  bool owns_fill_ = false;
  const std::vector<Example>* memory_ = nullptr;  // the complete memory cache
  std::atomic<int64_t>* hits_ = nullptr;          // the node's counters, looked up once
  std::atomic<int64_t>* misses_ = nullptr;
  int64_t pending_hits_ = 0;  // not yet added to the counters (counted())
  int64_t pending_misses_ = 0;
};

std::unique_ptr<Iterator> CacheDataset::make_iterator_impl(const IteratorContext& ctx) const {
  return std::make_unique<CacheIterator>(*this, ctx);
}

void CacheIterator::decide() {
  const CacheOptions& o = ds_.options();
  CacheState& s = ds_.state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!o.path.empty() && std::filesystem::exists(cache_file_path(o))) {
    reader_ = std::make_unique<CacheReader>(cache_file_path(o), o.key);
    mode_ = Mode::kDisk;
    return;
  }
  if (o.path.empty() && s.complete) {
    mode_ = Mode::kMemory;
    return;
  }
  if (s.filling) {
    fill_epoch_ = ctx_.epoch;
    open_input(fill_epoch_);
    mode_ = Mode::kPassThrough;
    return;
  }
  s.filling = owns_fill_ = true;
  mode_ = Mode::kFill;
  fill_epoch_ = s.first_epoch.value_or(ctx_.epoch);
  open_input(fill_epoch_);
  if (!o.path.empty()) {
    std::filesystem::create_directories(o.path);
    writer_ = std::make_unique<CacheWriter>(cache_file_path(o), o.key);
  }
}

void CacheIterator::release_fill() {
  if (!owns_fill_) return;
  std::lock_guard<std::mutex> lock(ds_.state().mu);
  ds_.state().filling = false;
  owns_fill_ = false;
}

std::optional<Example> CacheIterator::next_impl() {
  if (mode_ == Mode::kUndecided) decide();
  std::optional<Example> e;
  switch (mode_) {
    case Mode::kFill:
      e = counted(fill(), false);
      break;
    case Mode::kPassThrough:
    case Mode::kTail:
      if (in_) e = counted(in_->next(), false);
      break;
    case Mode::kMemory:
      e = from_memory();
      break;
    case Mode::kDisk:
      e = counted(reader_->next(), true);
      break;
    case Mode::kUndecided:
      break;
  }
  if (e) ++position_;
  return e;
}

std::optional<Example> CacheIterator::fill() {
  std::optional<Example> e = in_->next();
  if (!e) {
    finish_fill();
    return e;
  }
  if (writer_) {
    writer_->add(*e);
    if (stats()) stats()->counter("cached_bytes") += static_cast<int64_t>(e->nbytes());
    if (stats()) stats()->counter("cached_elements") += 1;
  } else {
    keep_in_memory(*e);
  }
  return e;
}

void CacheIterator::keep_in_memory(const Example& e) {
  const CacheOptions& o = ds_.options();
  filled_.push_back(e);
  filled_bytes_ += static_cast<int64_t>(e.nbytes());
  if (stats()) stats()->counter("cached_bytes") += static_cast<int64_t>(e.nbytes());
  if (stats()) stats()->counter("cached_elements") += 1;
  if (filled_bytes_ <= o.max_bytes) return;
  if (!o.prefix) {
    cache_error(ErrorCode::kOutOfRange,
                "the data do not fit in the memory cache: " + std::to_string(filled_bytes_) +
                    " bytes of tensors after " + std::to_string(filled_.size()) +
                    " elements, over max_bytes = " + std::to_string(o.max_bytes) +
                    "; raise max_bytes, cache on disk (\"path\"), or keep the prefix that "
                    "fits (\"on_full\": \"prefix\")",
                e.describe());
  }
  // The prefix that fits, and where the input is after it: later passes continue there.
  StateWriter w;
  in_->save(w);
  {
    std::lock_guard<std::mutex> lock(ds_.state().mu);
    CacheState& s = ds_.state();
    s.data = std::move(filled_);
    s.bytes = filled_bytes_;
    s.tail_state = w.take();
    s.fill_epoch = fill_epoch_;
    s.complete = true;
  }
  filled_.clear();
  release_fill();
  mode_ = Mode::kPassThrough;
}

void CacheIterator::finish_fill() {
  if (writer_) {
    writer_->finish();
    writer_.reset();
  } else {
    std::lock_guard<std::mutex> lock(ds_.state().mu);
    CacheState& s = ds_.state();
    s.data = std::move(filled_);
    s.bytes = filled_bytes_;
    s.tail_state.clear();
    s.fill_epoch = fill_epoch_;
    s.complete = true;
  }
  filled_.clear();
  release_fill();
  mode_ = Mode::kPassThrough;  // the input has ended: so does this pass
}

std::optional<Example> CacheIterator::from_memory() {
  CacheState& s = ds_.state();
  if (!memory_) {  // complete: the cached elements do not change any more
    std::lock_guard<std::mutex> lock(s.mu);
    memory_ = &s.data;
  }
  if (static_cast<size_t>(position_) < memory_->size())
    return counted((*memory_)[static_cast<size_t>(position_)], true);
  std::string tail;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    tail = s.tail_state;
    fill_epoch_ = s.fill_epoch;
  }
  mode_ = Mode::kTail;
  if (tail.empty()) return std::nullopt;
  open_input(fill_epoch_);
  StateReader r(tail);
  in_->restore(r);
  return counted(in_->next(), false);
}

// A restored memory-reading pass in a process whose cache is empty: the first pass again.
void CacheIterator::refill_memory() {
  {
    std::lock_guard<std::mutex> lock(ds_.state().mu);
    if (ds_.state().complete) return;
  }
  CacheIterator filler(ds_, ctx_);
  filler.ctx_.epoch = fill_epoch_;
  while (filler.mode_ != Mode::kPassThrough || filler.owns_fill_) {
    if (!filler.next_impl()) break;
  }
  std::lock_guard<std::mutex> lock(ds_.state().mu);
  if (!ds_.state().complete)
    cache_error(ErrorCode::kInternal, "restore: the memory cache could not be refilled");
}

void CacheIterator::restore(StateReader& r) {
  r.expect("cache");
  const auto mode = static_cast<Mode>(r.read_u64());
  position_ = r.read_i64();
  fill_epoch_ = r.read_i64();
  release_fill();
  writer_.reset();
  reader_.reset();
  in_.reset();
  filled_.clear();
  const bool has_input = r.read_bool();
  mode_ = mode;
  if (mode == Mode::kFill) {  // its prefix was in the old process: the next pass fills
    mode_ = Mode::kPassThrough;
    std::lock_guard<std::mutex> lock(ds_.state().mu);
    ds_.state().first_epoch = fill_epoch_;
  }
  if (mode == Mode::kMemory || mode == Mode::kTail) refill_memory();
  if (mode == Mode::kDisk) {
    const CacheOptions& o = ds_.options();
    reader_ = std::make_unique<CacheReader>(cache_file_path(o), o.key);
    reader_->skip(static_cast<uint64_t>(position_));
  }
  if (has_input) {
    open_input(fill_epoch_);
    in_->restore(r);
  }
}

}  // namespace

std::string cache_file_path(const CacheOptions& o) {
  return (std::filesystem::path(o.path) / ("cache-" + o.key + ".decache")).string();
}

DatasetPtr make_cache(DatasetPtr input, CacheOptions o) {
  if (!o.path.empty()) {
    if (o.key.empty() ||
        o.key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789_.-") != std::string::npos)
      throw_error(ErrorCode::kInvalidArgument, "cache",
                  "key must be letters, digits, '_', '.' or '-', got \"" + o.key + "\"");
    if (o.prefix)
      throw_error(ErrorCode::kInvalidArgument, "cache",
                  "on_full: \"prefix\" is for the memory cache; a disk cache holds everything");
  }
  if (o.max_bytes < 0)
    throw_error(ErrorCode::kInvalidArgument, "cache",
                "max_bytes must be >= 0, got " + std::to_string(o.max_bytes));
  if (o.max_bytes == 0)
    o.max_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 4;
  return std::make_shared<CacheDataset>(std::move(input), std::move(o));
}

}  // namespace dataecho
