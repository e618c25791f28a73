// RecordingServer: a loopback HTTP/1.1 server that records every request head and answers
// each from a script (one connection per request, `Connection: close`). The HTTP stream's
// tests script its faults (errors, cut bodies, an ignored Range); the S3 signing tests
// give it AWS's documented requests.
#pragma once

#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace dataecho::testing {

// A request as received: its head (request line and headers, CRLF-separated).
struct RecordedRequest {
  std::string head;
  // The value of the first header `name` (case-insensitive), "" when absent.
  std::string header(const std::string& name) const {
    size_t at = 0;
    while ((at = head.find("\r\n", at)) != std::string::npos) {
      at += 2;
      if (head.size() - at > name.size() && head[at + name.size()] == ':' &&
          strncasecmp(head.c_str() + at, name.c_str(), name.size()) == 0) {
        size_t v = at + name.size() + 1;
        while (v < head.size() && head[v] == ' ') ++v;
        return head.substr(v, head.find("\r\n", v) - v);
      }
    }
    return "";
  }
  std::string target() const {  // "/bucket/key?query"
    const size_t a = head.find(' ') + 1;
    return head.substr(a, head.find(' ', a) - a);
  }
};

// An answer: the status line's code, extra header lines ("Name: value\r\n"), the body.
struct ScriptedAnswer {
  int status = 200;
  std::string headers;
  std::string body;
  size_t cut_after = SIZE_MAX;  // close the connection after this many body bytes
};

// `body` as S3 serves an object: 206 with Content-Range for a "Range: bytes=N-" request.
inline ScriptedAnswer object_answer(const RecordedRequest& r, const std::string& body) {
  const std::string range = r.header("Range");
  if (range.rfind("bytes=", 0) != 0) return {200, "ETag: \"e1\"\r\n", body};
  const size_t from = std::stoull(range.substr(6));
  return {206,
          "ETag: \"e1\"\r\nContent-Range: bytes " + std::to_string(from) + "-" +
              std::to_string(body.size() - 1) + "/" + std::to_string(body.size()) + "\r\n",
          body.substr(from)};
}

// S3's XML error answer.
inline ScriptedAnswer s3_error_answer(int status, const std::string& code,
                                      const std::string& extra_xml = "",
                                      const std::string& headers = "") {
  return {status, "Content-Type: application/xml\r\n" + headers,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code +
              "</Code><Message>scripted " + code + "</Message>" + extra_xml +
              "<RequestId>4442587FB7D0A2F9</RequestId></Error>"};
}

class RecordingServer {
 public:
  using Script = std::function<ScriptedAnswer(int index, const RecordedRequest&)>;
  explicit RecordingServer(Script script) : script_(std::move(script)) {
    fd_ = listen_loopback(&port_);
    thread_ = std::thread([this] { serve(); });
  }
  ~RecordingServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<RecordedRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    int index = 0;
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      RecordedRequest r;
      if (read_head(c, &r.head)) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          requests_.push_back(r);
        }
        answer(c, r, script_(index++, r));
      }
      close(c);
    }
  }
  static bool read_head(int c, std::string* head) {
    char buf[4096];
    while (head->find("\r\n\r\n") == std::string::npos && head->size() < 65536) {
      pollfd p{c, POLLIN, 0};
      if (poll(&p, 1, 2000) <= 0) return false;
      const ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return false;
      head->append(buf, static_cast<size_t>(n));
    }
    head->resize(head->find("\r\n\r\n") + 2);
    return true;
  }
  static void answer(int c, const RecordedRequest& r, const ScriptedAnswer& a) {
    const bool head_only = r.head.rfind("HEAD ", 0) == 0;
    std::string out = "HTTP/1.1 " + std::to_string(a.status) + " Scripted\r\n" + a.headers +
                      "Content-Length: " + std::to_string(a.body.size()) +
                      "\r\nConnection: close\r\n\r\n";
    if (!head_only) out.append(a.body, 0, std::min(a.body.size(), a.cut_after));
    send_all(c, out.data(), out.size());
  }

  Script script_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<RecordedRequest> requests_;
};

}  // namespace dataecho::testing
