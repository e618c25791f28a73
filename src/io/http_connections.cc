#include "http_connections.h"

#include "dataecho/core/error.h"
#include "http_common.h"

namespace dataecho::http {
namespace {

constexpr size_t kMaxIdleHandles = 64;

}  // namespace

void ensure_curl_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw Error(ErrorCode::kInternal, kStage, "curl_global_init failed");
    }
  });
}

std::string origin_of(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  size_t slash = url.find('/', scheme + 3);
  return slash == std::string::npos ? url : url.substr(0, slash);
}

CurlHandles::CurlHandles() : multi(curl_multi_init()), easy(curl_easy_init()) {
  if (!multi || !easy) throw Error(ErrorCode::kInternal, kStage, "cannot create curl handles");
}

CurlHandles::~CurlHandles() {
  curl_easy_cleanup(easy);
  curl_multi_cleanup(multi);
}

std::unique_ptr<CurlHandles> HandlePool::take(const std::string& origin) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = idle_.size(); i-- > 0;) {
      if (idle_[i]->origin == origin) {
        auto h = std::move(idle_[i]);
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        return h;
      }
    }
  }
  auto h = std::make_unique<CurlHandles>();
  h->origin = origin;
  return h;
}

void HandlePool::give(std::unique_ptr<CurlHandles> h) {
  std::unique_ptr<CurlHandles> dropped;
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() >= kMaxIdleHandles) {
    dropped = std::move(idle_.front());
    idle_.erase(idle_.begin());
  }
  idle_.push_back(std::move(h));
}

HandlePool& handle_pool() {
  // Never destroyed: handles may outlive static destruction order otherwise.
  static HandlePool* pool = new HandlePool;
  return *pool;
}

}  // namespace dataecho::http
