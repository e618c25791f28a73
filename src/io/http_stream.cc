// HttpStream: one URL streamed by a background thread into a bounded ring buffer.
//
// Threading. Each stream owns one transfer thread that drives a private curl multi
// handle (curl_multi_perform / curl_multi_poll). The thread is the only one that touches
// the curl handles; the reader thread only touches the ring buffer (under mu_) and wakes
// the transfer thread with curl_multi_wakeup(), which is thread-safe.
//
// Buffering. The write callback copies into the ring buffer; when it is full the callback
// returns CURL_WRITEFUNC_PAUSE, so libcurl stops reading the socket (and, being paused,
// the low-speed check does not fire while the consumer is slow). read() unpauses once a
// quarter of the ring is free. At most ring capacity + one libcurl receive buffer are held.
//
// Keep-alive. libcurl's shared connection cache (CURL_LOCK_DATA_CONNECT) is documented
// as unsafe across threads, so connections are reused through a process-wide pool of
// idle (multi, easy) handle pairs instead: a pair's multi keeps its connections alive,
// a closing stream gives its pair back, and the next stream to the same origin takes it
// (http_connections.h).
//
// Retries and resume. Each attempt asks for `Range: bytes=N-` where N is the offset of
// the next byte not yet put in the buffer, so a retry never repeats or drops a byte. A
// 200 answer to a ranged request (a server that ignores Range) is detected, and the
// first N bytes of it are skipped. A size or ETag that changes between attempts is data
// loss, not retried. Which failures are retried, and the backoff between tries, are the
// retry policy's (http_retry.h); this file is the curl transfer.
//
// S3. An s3:// object (s3_stream.h) is read by the same stream: its requests are signed
// (configure_common with the object's configuration), uri() and errors show
// s3://bucket/key, and an answer with an error status is not failed on by libcurl: its
// body, S3's XML error, is kept and says whether to retry or what to tell the user
// (s3_errors.h).
#include "dataecho/io/http_stream.h"

#include <curl/curl.h>

#include <strings.h>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "dataecho/core/cpu_affinity.h"
#include "dataecho/core/error.h"
#include "http_common.h"
#include "http_connections.h"
#include "http_retry.h"
#include "ring_buffer.h"
#include "s3_errors.h"
#include "s3_stream.h"

namespace dataecho {
namespace {

using http::configure_common;
using http::CurlHandles;
using http::ensure_curl_initialized;
using http::env_ca_file;
using http::handle_pool;
using http::origin_of;
using http::RingBuffer;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

bool iequals_prefix(const std::string& line, const char* name) {
  size_t n = std::strlen(name);
  if (line.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

class HttpStream final : public ByteStream {
 public:
  HttpStream(http::Target target, const StreamOptions& options)
      : url_(std::move(target.url)),
        display_(std::move(target.display)),
        s3_(std::move(target.s3)),
        options_(options),
        curl_buffer_(std::clamp<size_t>(options.buffer_bytes / 4, CURL_MAX_WRITE_SIZE, 512 << 10)),
        ring_(std::max<size_t>(options.buffer_bytes, 2 * curl_buffer_)) {
    ensure_curl_initialized();
    if (options_.stats) {
      c_bytes_ = &options_.stats->counter("http_bytes");
      c_requests_ = &options_.stats->counter("http_requests");
      c_retries_ = &options_.stats->counter("http_retries");
      c_resumed_ = &options_.stats->counter("http_resumed");
      c_connections_ = &options_.stats->counter("http_connections");
      c_range_ignored_ = &options_.stats->counter("http_range_ignored");
      if (s3_) c_slow_down_ = &options_.stats->counter("s3_retries_slowdown");
    }
    if (!is_https() && !options_.plain_http_credentials && carries_credentials()) {
      throw Error(ErrorCode::kInvalidArgument, http::kStage,
                  "refusing to send credentials (an Authorization header or user:password in "
                  "the URL) over plain http: use https, or set "
                  "\"http\": {\"plain_http_credentials\": true}",
                  display_);
    }
    for (const auto& h : options_.headers) headers_ = curl_slist_append(headers_, h.c_str());
    if (s3_)
      for (const auto& h : s3::request_headers(*s3_))
        headers_ = curl_slist_append(headers_, h.c_str());
    if (options_.insecure && options_.stats) ++options_.stats->counter("http_tls_unverified");
    // Connections are reused only between streams with the same TLS settings.
    handles_ = handle_pool().take(origin_of(url_) + "|" + tls_key());
    start_transfer(0);
    // Wait for the first response so that a missing URL fails here, and size() is known.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return response_seen_ || done_ || error_; });
    if (error_ && ring_.size() == 0) {
      std::exception_ptr e = error_;
      lock.unlock();
      stop_transfer();
      handle_pool().give(std::move(handles_));
      curl_slist_free_all(headers_);
      std::rethrow_exception(e);
    }
  }

  ~HttpStream() override {
    stop_transfer();
    if (handles_) handle_pool().give(std::move(handles_));
    curl_slist_free_all(headers_);
  }

  size_t read(void* dst, size_t n) override {
    if (n == 0) return 0;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ring_.size() > 0 || done_ || error_; });
    if (ring_.size() > 0) {
      size_t k = ring_.pop(static_cast<char*>(dst), n);
      position_ += k;
      bool wake = paused_ && !wakeup_sent_ && ring_.room() >= resume_room();
      if (wake) wakeup_sent_ = true;
      lock.unlock();
      if (wake) curl_multi_wakeup(handles_->multi);
      return k;
    }
    if (error_) std::rethrow_exception(error_);
    return 0;
  }

  uint64_t position() const override { return position_; }

  void seek(uint64_t offset) override {
    if (offset == position_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (size_ >= 0 && offset > static_cast<uint64_t>(size_)) {
        throw Error(ErrorCode::kOutOfRange, http::kStage,
                    "seek to byte " + std::to_string(offset) + " past the end (" +
                        std::to_string(size_) + " bytes)",
                    display_);
      }
      // Forward within what is already buffered: no new request.
      if (offset > position_ && offset - position_ <= ring_.size()) {
        ring_.pop(nullptr, offset - position_);
        position_ = offset;
        return;
      }
    }
    stop_transfer();
    ring_.clear();
    position_ = offset;
    start_transfer(offset);
  }

  int64_t size() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return size_;
  }

  const std::string& uri() const override { return display_; }

 private:
  struct Attempt {
    uint64_t offset = 0;      // the Range asked for
    long status = 0;          // HTTP status of the final response
    bool decided = false;     // the final response's headers were handled
    std::string status_line;  // of the response being received
    std::string content_range;
    std::string etag;
    int64_t content_length = -1;
    uint64_t delivered = 0;    // bytes put in the ring by this attempt
    std::exception_ptr fatal;  // a protocol violation found by a callback
    std::string error_text;    // libcurl's own message for a failure
    std::string error_body;    // S3: the body of a status >= 300 (its XML error)
    std::string region;        // S3: x-amz-bucket-region
  };

  // An Authorization header, or userinfo in the URL's authority.
  bool carries_credentials() const {
    for (const auto& h : options_.headers)
      if (strncasecmp(h.c_str(), "authorization:", 14) == 0) return true;
    const size_t authority = url_.find("//");
    if (authority == std::string::npos) return false;
    const size_t end = url_.find_first_of("/?#", authority + 2);
    return url_.substr(authority + 2, end - (authority + 2)).find('@') != std::string::npos;
  }
  bool is_https() const { return url_.size() > 8 && strncasecmp(url_.c_str(), "https://", 8) == 0; }
  // What decides which connections may be shared: the TLS settings.
  std::string tls_key() const {
    return (options_.insecure ? "insecure|" : "verify|") + options_.ca_file + "|" +
           options_.ca_path + "|" + (options_.ca_file.empty() ? env_ca_file() : "");
  }
  size_t resume_room() const { return std::max<size_t>(ring_.capacity() / 4, curl_buffer_); }

  void start_transfer(uint64_t offset) {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
    done_ = false;
    error_ = nullptr;
    paused_ = false;
    wakeup_sent_ = false;
    next_offset_ = offset;
    transfer_start_ = offset;
    thread_ = start_engine_thread([this] { run(); });
  }

  void stop_transfer() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    curl_multi_wakeup(handles_->multi);
    thread_.join();
  }

  void run() {
    try {
      transfer_loop();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_) error_ = std::current_exception();
    }
    cv_.notify_all();
  }

  void finish() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }

  // Attempts until the body is whole, a failure that is not retried, or a stop: each
  // from the next byte not yet delivered, waiting between tries as the policy says
  // (http_retry.h).
  void transfer_loop() {
    http::Backoff backoff(options_.max_retries, options_.backoff_initial_s, options_.backoff_max_s);
    while (true) {
      uint64_t offset;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        offset = next_offset_;
        if (size_ >= 0 && offset >= static_cast<uint64_t>(size_) && response_seen_) {
          done_ = true;
          return;
        }
      }
      Attempt a;
      a.offset = offset;
      const CURLcode code = perform(a);
      if (c_requests_) ++*c_requests_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
      }
      if (a.fatal) std::rethrow_exception(a.fatal);
      std::string err;
      // An error status whose body was read (S3's), where plain HTTP fails on it.
      const bool error_status = s3_ && code == CURLE_OK && a.status >= 300;
      // 416: asked for bytes at or past the end, nothing more to read.
      const bool past_end = a.status == 416 && (code == CURLE_HTTP_RETURNED_ERROR || error_status);
      if ((code == CURLE_OK && !error_status) || past_end) {
        std::lock_guard<std::mutex> lock(mu_);
        if (past_end || size_ < 0 || next_offset_ >= static_cast<uint64_t>(size_)) {
          if (!past_end && size_ < 0) size_ = static_cast<int64_t>(next_offset_);
          done_ = true;
          response_seen_ = true;
          return;
        }
        err = "body ended at byte " + std::to_string(next_offset_) + " of " + std::to_string(size_);
      } else {
        err = why_failed(a, code);
      }
      // A transient failure: retry from the next byte not yet delivered.
      const double delay = backoff.after_failure(a.delivered, err, display_);
      if (c_retries_) ++*c_retries_;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::duration<double>(delay), [&] { return stop_; });
      if (stop_) return;
      if (next_offset_ > transfer_start_ && c_resumed_) ++*c_resumed_;
    }
  }

  // Why a failed attempt is worth another try; throws for one that is not (http_retry.h,
  // s3_errors.h).
  std::string why_failed(const Attempt& a, CURLcode code) {
    if (!s3_ || code != CURLE_OK)
      return http::retry_reason({code, a.status, a.error_text}, display_);
    const s3::Retry r =
        s3::classify_reply({a.status, a.error_body, a.region}, display_, s3_->region, "GET");
    if (r.slow_down && c_slow_down_) ++*c_slow_down_;
    return r.reason;
  }

  // The easy handle's options for one GET of a.offset onwards (`range` and `errbuf` must
  // outlive the transfer).
  void configure(CURL* easy, Attempt& a, char* errbuf, const std::string& range) {
    configure_common(easy, url_, options_, headers_, errbuf, s3_.get());
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, static_cast<long>(curl_buffer_));
    if (a.offset > 0) curl_easy_setopt(easy, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &HttpStream::on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &HttpStream::on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, this);
  }

  // One GET from a.offset, driven to completion, a stop, or an error.
  CURLcode perform(Attempt& a) {
    CURL* easy = handles_->easy;
    char errbuf[CURL_ERROR_SIZE] = {0};
    const std::string range = std::to_string(a.offset) + "-";
    configure(easy, a, errbuf, range);
    current_ = &a;
    CURLM* multi = handles_->multi;
    curl_multi_add_handle(multi, easy);
    CURLcode result = CURLE_OK;
    bool finished = false;
    while (true) {
      int running = 0;
      curl_multi_perform(multi, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
          result = msg->data.result;
          finished = true;
        }
      }
      if (finished || running == 0) break;
      bool unpause = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) break;
        if (paused_ && ring_.room() >= resume_room()) {
          paused_ = false;
          wakeup_sent_ = false;
          unpause = true;
        }
      }
      if (unpause) {
        curl_easy_pause(easy, CURLPAUSE_CONT);
        continue;
      }
      curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (status != 0) a.status = status;
    long connects = 0;
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
    if (c_connections_) *c_connections_ += connects;
    curl_multi_remove_handle(multi, easy);
    current_ = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      paused_ = false;
      wakeup_sent_ = false;
    }
    if (!finished && result == CURLE_OK) result = CURLE_RECV_ERROR;  // stopped or lost
    a.error_text = errbuf;
    return result;
  }

  static size_t on_header(char* p, size_t size, size_t n, void* self) {
    auto* s = static_cast<HttpStream*>(self);
    Attempt& a = *s->current_;
    std::string line(p, size * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or 100)
      a.status_line = trim(line);
      a.content_range.clear();
      a.etag.clear();
      a.region.clear();
      a.content_length = -1;
    } else if (iequals_prefix(line, "x-amz-bucket-region:")) {
      a.region = trim(line.substr(20));
    } else if (iequals_prefix(line, "content-range:")) {
      a.content_range = trim(line.substr(14));
    } else if (iequals_prefix(line, "etag:")) {
      a.etag = trim(line.substr(5));
    } else if (iequals_prefix(line, "content-length:")) {
      a.content_length = std::atoll(trim(line.substr(15)).c_str());
    } else if (line == "\r\n" || line == "\n") {
      long status = 0;
      size_t sp = a.status_line.find(' ');
      if (sp != std::string::npos) status = std::atol(a.status_line.c_str() + sp + 1);
      a.status = status;
      if (status >= 200 && status < 300 && !a.decided) {
        try {
          s->decide(a);
        } catch (...) {
          a.fatal = std::current_exception();
          return 0;  // aborts the transfer
        }
      }
    }
    return size * n;
  }

  // The final response's headers: checks them against what was asked and seen before.
  void decide(Attempt& a) {
    a.decided = true;
    int64_t total = -1;
    uint64_t skip = 0;
    if (a.status == 206) {
      unsigned long long first = 0, last = 0;
      char star = 0;
      long long whole = -1;
      if (std::sscanf(a.content_range.c_str(), "bytes %llu-%llu/%lld", &first, &last, &whole) >=
          2) {
        total = whole;
      } else if (std::sscanf(a.content_range.c_str(), "bytes %llu-%llu/%c", &first, &last, &star) <
                 2) {
        throw Error(ErrorCode::kDataLoss, http::kStage,
                    "206 response with a bad Content-Range '" + a.content_range + "'", display_);
      }
      if (first != a.offset) {
        throw Error(ErrorCode::kDataLoss, http::kStage,
                    "asked for bytes " + std::to_string(a.offset) + "- and got Content-Range '" +
                        a.content_range + "'",
                    display_);
      }
    } else {
      total = a.content_length;
      skip = a.offset;  // a server that ignores Range sends the whole body again
      if (a.offset > 0 && c_range_ignored_) ++*c_range_ignored_;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (size_ >= 0 && total >= 0 && total != size_) {
      throw Error(ErrorCode::kDataLoss, http::kStage,
                  "changed size on the server during the read (" + std::to_string(size_) +
                      " bytes, now " + std::to_string(total) + ")",
                  display_);
    }
    if (!etag_.empty() && !a.etag.empty() && a.etag != etag_) {
      throw Error(ErrorCode::kDataLoss, http::kStage,
                  "changed on the server during the read (ETag " + etag_ + ", now " + a.etag + ")",
                  display_);
    }
    if (size_ < 0 && total >= 0) size_ = total;
    if (etag_.empty()) etag_ = a.etag;
    skip_ = skip;
    response_seen_ = true;
    cv_.notify_all();
  }

  static size_t on_body(char* p, size_t size, size_t n, void* self) {
    auto* s = static_cast<HttpStream*>(self);
    Attempt& a = *s->current_;
    size_t len = size * n;
    if (s->s3_ && a.status >= 300) {  // S3's XML error, read by why_failed
      constexpr size_t kMaxErrorBody = 16 << 10;
      a.error_body.append(
          p, std::min(len, kMaxErrorBody - std::min(kMaxErrorBody, a.error_body.size())));
      return len;
    }
    if (!a.decided) {
      // Headers without an end-of-headers line reached us: decide now.
      try {
        if (a.status == 0) a.status = 200;
        s->decide(a);
      } catch (...) {
        a.fatal = std::current_exception();
        return 0;
      }
    }
    std::unique_lock<std::mutex> lock(s->mu_);
    if (s->stop_) return 0;
    size_t skipped = static_cast<size_t>(std::min<uint64_t>(s->skip_, len));
    size_t rest = len - skipped;
    if (rest > s->ring_.room()) {
      if (s->ring_.size() > 0) {
        s->paused_ = true;
        return CURL_WRITEFUNC_PAUSE;  // libcurl hands the same bytes again after unpausing
      }
      s->ring_.grow_to(rest);
    }
    s->skip_ -= skipped;
    s->ring_.push(p + skipped, rest);
    s->next_offset_ += rest;
    a.delivered += rest;
    lock.unlock();
    s->cv_.notify_all();
    if (s->c_bytes_) *s->c_bytes_ += static_cast<int64_t>(len);
    return len;
  }

  const std::string url_;
  const std::string display_;                   // what uri() and errors show
  const std::shared_ptr<const s3::Config> s3_;  // an S3 object: signed, S3's errors read
  curl_slist* headers_ = nullptr;               // options_.headers, for CURLOPT_HTTPHEADER
  const StreamOptions options_;
  const size_t curl_buffer_;
  std::unique_ptr<CurlHandles> handles_;
  std::thread thread_;
  uint64_t position_ = 0;  // reader thread only

  // Transfer thread only.
  Attempt* current_ = nullptr;
  uint64_t transfer_start_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  RingBuffer ring_;
  uint64_t next_offset_ = 0;  // offset of the next byte to put in the ring
  uint64_t skip_ = 0;         // bytes of a Range-ignoring 200 response still to drop
  int64_t size_ = -1;
  std::string etag_;
  bool response_seen_ = false;
  bool done_ = false;
  bool stop_ = false;
  bool paused_ = false;
  bool wakeup_sent_ = false;
  std::exception_ptr error_;

  std::atomic<int64_t>* c_bytes_ = nullptr;
  std::atomic<int64_t>* c_requests_ = nullptr;
  std::atomic<int64_t>* c_retries_ = nullptr;
  std::atomic<int64_t>* c_resumed_ = nullptr;
  std::atomic<int64_t>* c_connections_ = nullptr;
  std::atomic<int64_t>* c_range_ignored_ = nullptr;
  std::atomic<int64_t>* c_slow_down_ = nullptr;
};

}  // namespace

std::unique_ptr<ByteStream> http::open_target_stream(http::Target target,
                                                     const StreamOptions& options) {
  return std::make_unique<HttpStream>(std::move(target), options);
}

std::unique_ptr<ByteStream> open_http_stream(const std::string& url, const StreamOptions& options) {
  return http::open_target_stream({url, url, nullptr}, options);
}

}  // namespace dataecho
