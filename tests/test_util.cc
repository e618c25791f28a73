#include "test_util.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include <zlib.h>

#include "dataecho/core/example_json.h"
#include "dataecho/spec/build.h"

namespace dataecho::testing {

std::vector<Example> drain(Iterator& it) {
  std::vector<Example> out;
  while (auto e = it.next()) out.push_back(std::move(*e));
  return out;
}

std::vector<Example> drain(Pipeline& p, int64_t limit) {
  std::vector<Example> out;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    auto e = p.next();
    if (!e) break;
    out.push_back(std::move(*e));
  }
  return out;
}

std::vector<int64_t> ids(const std::vector<Example>& elements) {
  std::vector<int64_t> out;
  for (const auto& e : elements)
    for (size_t i = 0; i < e.num_rows(); ++i) out.push_back(e.row(i).id);
  return out;
}

std::vector<int32_t> echoes(const std::vector<Example>& elements) {
  std::vector<int32_t> out;
  for (const auto& e : elements)
    for (size_t i = 0; i < e.num_rows(); ++i) out.push_back(e.row(i).echo);
  return out;
}

std::vector<int64_t> values(const std::vector<Example>& elements, const std::string& field) {
  std::vector<int64_t> out;
  for (const auto& e : elements) {
    const Tensor& t = e.get(field);
    for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(t.data<int64_t>()[i]);
  }
  return out;
}

std::vector<int64_t> iota(int64_t n, int64_t start) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return v;
}

std::unique_ptr<Pipeline> build(const std::string& json_text) {
  return build_pipeline(parse_spec_text(json_text, "test"));
}

std::vector<Example> run(const std::string& json_text, int64_t limit) {
  auto p = build(json_text);
  return drain(*p, limit);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a dataecho::Error";
  return "";
}

std::string word_lines(int lines, uint32_t seed) {
  static const char* kWords[] = {"apple", "banana", "cherry", "dates",  "elder",
                                 "figs",  "grape",  "honey",  "kiwi",   "lemon",
                                 "mango", "nectar", "olive",  "papaya", "quince"};
  std::mt19937 rng(seed);
  std::string text;
  for (int i = 0; i < lines; ++i) {
    const int n = 3 + static_cast<int>(rng() % 6);
    for (int w = 0; w < n; ++w) text += std::string(w ? " " : "") + kWords[rng() % 15];
    text += "\n";
  }
  return text;
}

std::string temp_dir() {
  static std::mutex mu;
  static int counter = 0;
  std::lock_guard<std::mutex> lock(mu);
  auto base = std::filesystem::temp_directory_path() /
              ("dataecho-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(base);
  static std::vector<std::filesystem::path> made;
  if (made.empty()) {
    std::atexit([] {
      for (auto& p : made) {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    });
  }
  made.push_back(base);
  return base.string();
}

void expect_save_restore_identical(const std::string& json_text,
                                   const std::vector<int64_t>& save_points) {
  auto full = run(json_text);
  std::vector<std::string> expected;
  for (const auto& e : full) expected.push_back(example_to_json(e, true).dump());
  for (int64_t k : save_points) {
    SCOPED_TRACE("save after " + std::to_string(k) + " elements");
    std::string state;
    {
      auto p = build(json_text);
      auto head = drain(*p, k);
      ASSERT_EQ(static_cast<int64_t>(head.size()),
                std::min<int64_t>(k, static_cast<int64_t>(full.size())));
      state = p->save();
    }
    auto p2 = build(json_text);
    p2->restore(state);
    auto rest = drain(*p2);
    std::vector<std::string> got;
    for (const auto& e : rest) got.push_back(example_to_json(e, true).dump());
    std::vector<std::string> want(
        expected.begin() + std::min<size_t>(static_cast<size_t>(k), expected.size()),
        expected.end());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "element " << (k + static_cast<int64_t>(i));
  }
}

std::string gzip_bytes(const std::string& bytes, bool dictzip) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  gz_header h{};
  unsigned char extra[] = {'R', 'A', 6, 0, 1, 0, 0, 0x10, 1, 0};
  if (dictzip) {
    h.extra = extra;
    h.extra_len = sizeof(extra);
    EXPECT_EQ(deflateSetHeader(&z, &h), Z_OK);
  }
  std::string out(deflateBound(&z, bytes.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string write_gzip(const std::string& path, const std::string& bytes, bool dictzip) {
  std::ofstream(path, std::ios::binary) << gzip_bytes(bytes, dictzip);
  return path;
}

int spawn_tied(const std::vector<std::string>& argv, const std::array<int, 3>& stdio) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed for " + argv.at(0));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    for (int fd = 0; fd < 3; ++fd) {
      if (stdio[fd] >= 0) dup2(stdio[fd], fd);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int listen_loopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot listen on loopback");
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

void send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    p += k;
    n -= static_cast<size_t>(k);
  }
}

std::vector<Example> read_through_outage(Pipeline& pipeline, int first,
                                         const std::function<void()>& stop,
                                         const std::function<void()>& restart, std::string& error) {
  std::vector<Example> got;
  for (int i = 0; i < first; ++i) got.push_back(*pipeline.next());
  stop();
  error.clear();
  std::thread reader([&] {
    try {
      while (auto e = pipeline.next()) got.push_back(std::move(*e));
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (restart) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    restart();
  }
  reader.join();
  return got;
}

}  // namespace dataecho::testing
