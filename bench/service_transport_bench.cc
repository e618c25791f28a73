// The data service's transport, measured (the plan's rule for gRPC or ZeroMQ: docs/history/
// 2026-12-06-data-service-plan.md §6.4): frames of photo-sized crops (224x224x3 uint8)
// streamed from a server thread to a client over loopback, by
//   grpc        gRPC's generic server stream through the plugin, tensors as slices;
//   in_process  the in-process transport (no sockets: the frame's buffers are handed over);
//   tcp         a raw loopback TCP socket: writev of the frame's buffers, the receiver
//               reading each frame into one buffer (one copy: the ceiling for a socket).
// Each round sends the same bytes by each transport in turn; rounds alternate the order,
// and the median round per transport is printed: GB/s, CPU seconds per GB of the sending
// thread, the receiving thread and the whole process (gRPC's own threads included), and
// the fraction of tensor bytes the receiver viewed in place (and the mean size of the
// buffers it received). The load average is printed
// before and after: the figures are only as quiet as the machine.
//   service_transport_bench [--rounds 5] [--mb 512] [--crops 64] [--only grpc,tcp,...]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "service/frame.h"

namespace ds = dataecho::service;
using dataecho::Buffer;
using dataecho::DType;
using dataecho::Example;
using dataecho::Tensor;

namespace {

struct Options {
  int rounds = 5;
  int64_t mb = 512;
  int crops = 64;
  std::vector<std::string> only = {"grpc", "in_process", "tcp"};
};

struct Result {
  double seconds = 0, bytes = 0, send_cpu = 0, receive_cpu = 0, process_cpu = 0;
  double view_fraction = 0;
  double buffers = 0;  // received buffers (a transport's slices)
};

double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// The crops the server sends, made once: a worker's pipeline would have made them.
std::vector<Example> make_crops(int n) {
  std::vector<Example> crops;
  for (int i = 0; i < n; ++i) {
    Example e(i);
    e.set("image", Tensor::make(DType::kUInt8, {224, 224, 3}, [&](std::byte* out) {
            for (size_t k = 0; k < 224 * 224 * 3; ++k)
              out[k] = static_cast<std::byte>((k + i) & 0xff);
          }));
    e.set("label", Tensor::scalar<int64_t>(i));
    crops.push_back(std::move(e));
  }
  return crops;
}

ds::Frame make_frame(const std::vector<Example>& crops, int64_t first) {
  ds::FrameWriter w({ds::FrameKind::kElements, 1, 0, 0, 1});
  for (size_t i = 0; i < crops.size(); ++i) w.add(first + static_cast<int64_t>(i), crops[i]);
  return w.finish();
}

size_t frame_bytes(const ds::Frame& f) {
  size_t n = 0;
  for (const auto& b : f) n += b->size();
  return n;
}

// The receiving side's bookkeeping: decode, count, and the thread's CPU.
struct Receiver {
  ds::FrameReader reader{"bench server"};
  int64_t elements = 0;
  double buffers = 0;
  void take(const ds::Frame& frame) {
    elements += reader.read(frame).elements.size();
    buffers += static_cast<double>(frame.size());
  }
  double view_fraction() const {
    const auto& c = reader.counters();
    return static_cast<double>(c.view_bytes) / static_cast<double>(c.view_bytes + c.copied_bytes);
  }
};

Result over_transport(ds::Transport& transport, const std::vector<Example>& crops, int frames) {
  Result r;
  ds::Handlers handlers;
  handlers.is_stream = [](const std::string&) { return true; };
  handlers.stream = [&](const std::string&, std::string_view, ds::ServerCall& call) {
    const double cpu = cpu_seconds(RUSAGE_THREAD);
    for (int f = 0; f < frames; ++f)
      if (!call.write(make_frame(crops, int64_t{f} * static_cast<int64_t>(crops.size())))) break;
    r.send_cpu = cpu_seconds(RUSAGE_THREAD) - cpu;
  };
  auto server = transport.start_server("127.0.0.1:0", {}, "", handlers);
  auto channel = transport.open_channel("127.0.0.1:" + std::to_string(server->port()));
  Receiver receiver;
  const double process = cpu_seconds(RUSAGE_SELF), cpu = cpu_seconds(RUSAGE_THREAD);
  const auto start = std::chrono::steady_clock::now();
  auto stream = channel->stream("/dataecho.service.Worker/Read", "");
  ds::Frame frame;
  while (stream->next(frame) == ds::ClientStream::Next::kFrame) {
    r.bytes += static_cast<double>(frame_bytes(frame));
    receiver.take(frame);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.receive_cpu = cpu_seconds(RUSAGE_THREAD) - cpu;
  server->stop(1000);
  r.process_cpu = cpu_seconds(RUSAGE_SELF) - process;
  r.view_fraction = receiver.view_fraction();
  r.buffers = receiver.buffers;
  if (receiver.elements != int64_t{frames} * static_cast<int64_t>(crops.size()))
    throw std::runtime_error("lost elements over " + transport.name());
  return r;
}

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

void write_all(int fd, std::vector<iovec> iov) {
  size_t at = 0;
  while (at < iov.size()) {
    const ssize_t n =
        writev(fd, iov.data() + at, static_cast<int>(std::min<size_t>(iov.size() - at, 1024)));
    check(n >= 0, "writev");
    size_t left = static_cast<size_t>(n);
    while (at < iov.size() && left >= iov[at].iov_len) left -= iov[at++].iov_len;
    if (at < iov.size()) {
      iov[at].iov_base = static_cast<char*>(iov[at].iov_base) + left;
      iov[at].iov_len -= left;
    }
  }
}

bool read_all(int fd, std::byte* out, size_t n) {
  while (n > 0) {
    const ssize_t k = read(fd, out, n);
    check(k >= 0, "read");
    if (k == 0) return false;
    out += k, n -= static_cast<size_t>(k);
  }
  return true;
}

// A length before each frame, its buffers by writev; the receiver reads a frame into one
// buffer of its own and decodes it (views of that buffer).
Result over_tcp(const std::vector<Example>& crops, int frames) {
  Result r;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  check(bind(listener, reinterpret_cast<sockaddr*>(&addr), len) == 0, "bind");
  check(listen(listener, 1) == 0 &&
            getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
        "listen");
  std::thread sender([&] {
    const int fd = accept(listener, nullptr, nullptr);
    const double cpu = cpu_seconds(RUSAGE_THREAD);
    for (int f = 0; f < frames; ++f) {
      const ds::Frame frame = make_frame(crops, int64_t{f} * static_cast<int64_t>(crops.size()));
      uint64_t size = frame_bytes(frame);
      std::vector<iovec> iov{{&size, 8}};
      for (const auto& b : frame) iov.push_back({const_cast<std::byte*>(b->data()), b->size()});
      write_all(fd, std::move(iov));
    }
    r.send_cpu = cpu_seconds(RUSAGE_THREAD) - cpu;
    close(fd);
  });
  const double process = cpu_seconds(RUSAGE_SELF), cpu = cpu_seconds(RUSAGE_THREAD);
  const auto start = std::chrono::steady_clock::now();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  check(connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0, "connect");
  Receiver receiver;
  uint64_t size = 0;
  while (read_all(fd, reinterpret_cast<std::byte*>(&size), 8)) {
    auto buffer = Buffer::allocate(size);
    check(read_all(fd, buffer->mutable_data(), size), "read");
    r.bytes += static_cast<double>(size);
    receiver.take(ds::Frame{std::move(buffer)});
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.receive_cpu = cpu_seconds(RUSAGE_THREAD) - cpu;
  sender.join();
  close(fd);
  close(listener);
  r.process_cpu = cpu_seconds(RUSAGE_SELF) - process;
  r.view_fraction = receiver.view_fraction();
  r.buffers = receiver.buffers;
  return r;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--rounds") {
      o.rounds = std::stoi(value);
    } else if (key == "--mb") {
      o.mb = std::stoll(value);
    } else if (key == "--crops") {
      o.crops = std::stoi(value);
    } else if (key == "--only") {
      o.only.clear();
      std::stringstream ss(value);
      for (std::string t; std::getline(ss, t, ',');) o.only.push_back(t);
    } else {
      throw std::runtime_error("unknown option " + key +
                               " (--rounds N, --mb MB per round, --crops per frame, --only LIST)");
    }
  }
  return o;
}

Result run_one(const std::string& name, const std::vector<Example>& crops, int frames) {
  if (name == "grpc") return over_transport(*ds::grpc_transport(), crops, frames);
  if (name == "in_process") return over_transport(*ds::in_process_transport(), crops, frames);
  if (name == "tcp") return over_tcp(crops, frames);
  throw std::runtime_error("unknown transport " + name + " (grpc, in_process, tcp)");
}

void report(const std::string& name, std::vector<Result> rounds) {
  std::sort(rounds.begin(), rounds.end(),
            [](const Result& a, const Result& b) { return a.seconds < b.seconds; });
  const Result& m = rounds[rounds.size() / 2];
  const double gb = m.bytes / 1e9;
  std::printf(
      "%-11s %7.2f GB/s  CPU s/GB: send %.3f  receive %.3f  process %.3f  viewed %5.1f%%"
      " of %.0f KB buffers  (rounds %.2f..%.2f GB/s)\n",
      name.c_str(), gb / m.seconds, m.send_cpu / gb, m.receive_cpu / gb, m.process_cpu / gb,
      100 * m.view_fraction, m.bytes / m.buffers / 1e3, gb / rounds.back().seconds,
      gb / rounds.front().seconds);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const auto crops = make_crops(o.crops);
  const size_t per_frame = frame_bytes(make_frame(crops, 0));
  const int frames =
      static_cast<int>(std::max<int64_t>(1, o.mb * 1'000'000 / static_cast<int64_t>(per_frame)));
  std::printf("%d rounds of %d frames of %d crops (%zu bytes a frame); %u CPUs; load %s\n",
              o.rounds, frames, o.crops, per_frame, std::thread::hardware_concurrency(),
              load_average().c_str());
  std::map<std::string, std::vector<Result>> results;
  for (int round = 0; round < o.rounds; ++round) {
    std::vector<std::string> order = o.only;
    if (round % 2) std::reverse(order.begin(), order.end());
    for (const auto& name : order) results[name].push_back(run_one(name, crops, frames));
  }
  for (const auto& name : o.only) report(name, results[name]);
  std::printf("load after: %s\n", load_average().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "service_transport_bench: %s\n", e.what());
  return 1;
}
