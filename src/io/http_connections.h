// The HTTP stream's keep-alive connections: (multi, easy) curl handle pairs, kept in a
// process-wide pool of idle pairs by origin. libcurl's shared connection cache is
// documented as unsafe across threads, so a pair's multi handle is what keeps its
// connections alive: a closing stream gives its pair back, and the next stream to the
// same origin takes it. Private to the io layer. Thread-safety: the pool is thread-safe;
// a pair belongs to one stream at a time.
#pragma once

#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dataecho::http {

// curl_global_init, once per process.
void ensure_curl_initialized();

// "http://host:port/path" -> "http://host:port": the key of a connection.
std::string origin_of(const std::string& url);

// A multi handle with one easy handle. The multi's connection cache is what keeps a
// connection alive between streams.
struct CurlHandles {
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  std::string origin;  // the last origin it talked to
  CurlHandles();
  ~CurlHandles();
  CurlHandles(const CurlHandles&) = delete;
  CurlHandles& operator=(const CurlHandles&) = delete;
};

// Idle handle pairs. Thread-safe. Holds at most 64 pairs (and their connections); the
// oldest is closed when a new one comes back to a full pool.
class HandlePool {
 public:
  std::unique_ptr<CurlHandles> take(const std::string& origin);
  void give(std::unique_ptr<CurlHandles> h);

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<CurlHandles>> idle_;
};

HandlePool& handle_pool();

}  // namespace dataecho::http
