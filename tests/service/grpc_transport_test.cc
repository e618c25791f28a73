// The data service's transport contract (src/service/transport.h), run on both
// transports: gRPC through its plugin, over loopback, and the in-process one. Where the
// build has no plugin (TSan, or no libgrpc++-dev) the gRPC instances are skipped and say
// why; where it has one they must load it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "dataecho/core/module_dir.h"
#include "service/protocol.h"
#include "service/transport.h"
#include "test_util.h"

namespace dataecho::service {
namespace {

constexpr const char* kUnary = "/dataecho.service.Test/Echo";
constexpr const char* kStream = "/dataecho.service.Test/Frames";

std::shared_ptr<const Buffer> bytes(const std::string& s) {
  auto b = Buffer::allocate(s.size());
  std::memcpy(b->mutable_data(), s.data(), s.size());
  return b;
}

std::string joined(const Frame& frame) {
  std::string s;
  for (const auto& b : frame) s.append(reinterpret_cast<const char*>(b->data()), b->size());
  return s;
}

// Frame i's body: `size` bytes that depend on i and the offset.
std::shared_ptr<const Buffer> body(uint64_t i, size_t size) {
  auto b = Buffer::allocate(size);
  auto* p = reinterpret_cast<uint8_t*>(b->mutable_data());
  for (size_t k = 0; k < size; ++k) p[k] = static_cast<uint8_t>(i * 131 + k * 7 + (k >> 12));
  return b;
}

CallOptions within(int64_t deadline_ms) {
  CallOptions o;
  o.deadline_ms = deadline_ms;
  return o;
}

// A one-shot gate that handlers wait on, so that no test depends on how long a sleep is.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  bool wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return open; });
  }
};

class TransportContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "in_process") {
      transport_ = in_process_transport();
      return;
    }
#ifndef DATAECHO_HAVE_GRPC_PLUGIN
    GTEST_SKIP() << "this build has no gRPC plugin (TSan, or built without libgrpc++-dev)";
#endif
    transport_ = grpc_transport();
  }

  // A server on a free loopback port, and a channel to it.
  void start(Handlers handlers, const std::string& token = "") {
    server_ = transport_->start_server("127.0.0.1:0", options_, token, std::move(handlers));
    ASSERT_GT(server_->port(), 0);
    channel_ = transport_->open_channel("127.0.0.1:" + std::to_string(server_->port()), options_);
  }

  void TearDown() override {
    channel_.reset();
    if (server_) server_->stop(0);
  }

  TransportOptions options_;
  std::shared_ptr<Transport> transport_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Channel> channel_;
};

Handlers echo_handlers() {
  Handlers h;
  h.unary = [](const std::string& method, std::string_view request) {
    return method + " got " + std::string(request);
  };
  return h;
}

TEST_P(TransportContract, UnaryRoundTrip) {
  start(echo_handlers());
  EXPECT_EQ(channel_->unary(kUnary, "hello"), std::string(kUnary) + " got hello");
  // Bytes, not text: a request with zeros, and an empty one.
  const std::string binary("a\0b\0c", 5);
  EXPECT_EQ(channel_->unary(kUnary, binary), std::string(kUnary) + " got " + binary);
  EXPECT_EQ(channel_->unary(kUnary, ""), std::string(kUnary) + " got ");
}

// Many frames, small and large (8 MB, past gRPC's default 4 MB message limit), each of a
// header buffer and a body buffer: every one arrives whole and in order.
TEST_P(TransportContract, AStreamOfManyFramesArrivesIntactAndInOrder) {
  constexpr uint64_t kFrames = 300;
  auto size_of = [](uint64_t i) -> size_t { return i % 100 == 7 ? 8u << 20 : 1000 + i * 37; };
  Handlers h;
  h.is_stream = [](const std::string& method) { return method == kStream; };
  h.stream = [&](const std::string&, std::string_view request, ServerCall& call) {
    ASSERT_EQ(request, "from 0");
    for (uint64_t i = 0; i < kFrames; ++i)
      if (!call.write({bytes("frame " + std::to_string(i) + ";"), body(i, size_of(i))})) return;
  };
  start(std::move(h));
  auto stream = channel_->stream(kStream, "from 0");
  Frame frame;
  uint64_t n = 0;
  while (stream->next(frame, 60'000) == ClientStream::Next::kFrame) {
    const std::string header = "frame " + std::to_string(n) + ";";
    const std::string got = joined(frame);
    ASSERT_EQ(got.size(), header.size() + size_of(n)) << "frame " << n;
    ASSERT_EQ(got.substr(0, header.size()), header);
    const auto expected = body(n, size_of(n));
    ASSERT_EQ(std::memcmp(got.data() + header.size(), expected->data(), expected->size()), 0)
        << "frame " << n;
    ++n;
  }
  EXPECT_EQ(n, kFrames);
}

TEST_P(TransportContract, ADeadlineThatExpiresGivesDeadlineExceeded) {
  Gate gate;
  Handlers h;
  h.unary = [&](const std::string&, std::string_view) {
    gate.wait(std::chrono::seconds(30));
    return std::string("late");
  };
  start(std::move(h));
  try {
    channel_->unary(kUnary, "x", within(200));
    ADD_FAILURE() << "the call outlived its deadline";
  } catch (const CallError& e) {
    EXPECT_EQ(e.call_code(), CallCode::kDeadlineExceeded) << e.what();
    EXPECT_NE(std::string(e.what()).find("DEADLINE_EXCEEDED"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(kUnary), std::string::npos) << e.what();
  }
  gate.release();
  server_->stop(30'000);  // its handler returns before the gate goes away
}

// A client that cancels its stream ends the server's write, which is blocked because the
// client stopped reading.
TEST_P(TransportContract, ACancelledStreamEndsTheServersBlockingWrite) {
  std::promise<uint64_t> written;
  Handlers h;
  h.is_stream = [](const std::string&) { return true; };
  h.stream = [&](const std::string&, std::string_view, ServerCall& call) {
    uint64_t i = 0;
    while (call.write({body(i, 1 << 20)})) ++i;
    EXPECT_TRUE(call.cancelled());
    written.set_value(i);
  };
  start(std::move(h));
  auto stream = channel_->stream(kStream, "");
  Frame frame;
  ASSERT_EQ(stream->next(frame, 30'000), ClientStream::Next::kFrame);
  auto ended = written.get_future();
  // The server blocks: the client reads no more (two frames ahead, and the windows).
  EXPECT_EQ(ended.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  stream->cancel();
  ASSERT_EQ(ended.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the server's write did not end after the cancel";
  EXPECT_LT(ended.get(), 200u);  // it was held back, not writing all along
  // What was received before the cancel may still come; then the call ends cancelled.
  try {
    while (stream->next(frame, 30'000) == ClientStream::Next::kFrame) {
    }
    ADD_FAILURE() << "a cancelled stream ended as if finished";
  } catch (const CallError& e) {
    EXPECT_EQ(e.call_code(), CallCode::kCancelled) << e.what();
  }
  server_->stop(30'000);  // its handler returns before `written` goes away
}

TEST_P(TransportContract, AWrongTokenIsRefused) {
  Handlers h = echo_handlers();
  h.is_stream = [](const std::string& method) { return method == kStream; };
  h.stream = [](const std::string&, std::string_view, ServerCall& call) {
    call.write({bytes("one")});
  };
  start(std::move(h), "s3cret");
  EXPECT_EQ(channel_->unary(kUnary, "a", {.token = "s3cret"}), std::string(kUnary) + " got a");
  for (const std::string token : {"s3cre", "s3cret!", "", "S3CRET"}) {
    try {
      channel_->unary(kUnary, "a", {.token = token});
      ADD_FAILURE() << "token '" << token << "' was accepted";
    } catch (const CallError& e) {
      EXPECT_EQ(e.call_code(), CallCode::kUnauthenticated) << e.what();
      EXPECT_NE(std::string(e.what()).find("x-dataecho-token"), std::string::npos) << e.what();
    }
  }
  Frame frame;
  auto good = channel_->stream(kStream, "", {.token = "s3cret"});
  ASSERT_EQ(good->next(frame, 30'000), ClientStream::Next::kFrame);
  EXPECT_EQ(joined(frame), "one");
  auto bad = channel_->stream(kStream, "", {.token = "guess"});
  try {
    bad->next(frame, 30'000);
    ADD_FAILURE() << "a stream with a wrong token was served";
  } catch (const CallError& e) {
    EXPECT_EQ(e.call_code(), CallCode::kUnauthenticated) << e.what();
  }
}

TEST_P(TransportContract, HandlerErrorsReachTheClientWithTheirCode) {
  Handlers h;
  h.unary = [](const std::string&, std::string_view request) -> std::string {
    if (request == "bad") throw CallError(CallCode::kInvalidArgument, "job 'train' exists");
    throw std::runtime_error("disk full");
  };
  h.is_stream = [](const std::string& method) { return method == kStream; };
  h.stream = [](const std::string&, std::string_view, ServerCall& call) {
    call.write({bytes("first")});
    throw CallError(CallCode::kNotFound, "no piece 7");
  };
  start(std::move(h));
  auto code_of = [&](const std::string& request, std::string& what) {
    try {
      channel_->unary(kUnary, request);
    } catch (const CallError& e) {
      what = e.what();
      return e.call_code();
    }
    return CallCode::kOk;
  };
  std::string what;
  EXPECT_EQ(code_of("bad", what), CallCode::kInvalidArgument);
  EXPECT_NE(what.find("job 'train' exists"), std::string::npos) << what;
  EXPECT_EQ(code_of("other", what), CallCode::kUnknown);
  EXPECT_NE(what.find("disk full"), std::string::npos) << what;
  auto stream = channel_->stream(kStream, "");
  Frame frame;
  ASSERT_EQ(stream->next(frame, 30'000), ClientStream::Next::kFrame);
  EXPECT_EQ(joined(frame), "first");
  try {
    stream->next(frame, 30'000);
    ADD_FAILURE() << "the handler's error did not reach the client";
  } catch (const CallError& e) {
    EXPECT_EQ(e.call_code(), CallCode::kNotFound) << e.what();
    EXPECT_NE(std::string(e.what()).find("no piece 7"), std::string::npos) << e.what();
  }
}

// stop() with a handler blocked in write (its client reads nothing) returns once the
// grace has passed: the call is cancelled and the handler returns.
TEST_P(TransportContract, StopEndsAHandlerBlockedInWrite) {
  std::atomic<bool> returned{false};
  Handlers h;
  h.is_stream = [](const std::string&) { return true; };
  h.stream = [&](const std::string&, std::string_view, ServerCall& call) {
    while (call.write({body(0, 1 << 20)})) {
    }
    returned = true;
  };
  start(std::move(h));
  auto stream = channel_->stream(kStream, "");
  Frame frame;
  ASSERT_EQ(stream->next(frame, 30'000), ClientStream::Next::kFrame);
  server_->stop(100);
  EXPECT_TRUE(returned);
}

TEST_P(TransportContract, NoServerThereIsUnavailable) {
  start(echo_handlers());
  const int port = server_->port();
  server_->stop(0);
  auto channel = transport_->open_channel("127.0.0.1:" + std::to_string(port), options_);
  try {
    channel->unary(kUnary, "x", within(5'000));
    ADD_FAILURE() << "a call reached a stopped server";
  } catch (const CallError& e) {
    EXPECT_EQ(e.call_code(), CallCode::kUnavailable) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Service, TransportContract, ::testing::Values("grpc", "in_process"),
                         [](const auto& info) { return info.param; });

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// TLS over the plugin: a CA and a server certificate for 127.0.0.1 and localhost that
// `openssl` makes in a temporary folder. A channel trusting the CA reaches the server by
// either name; one that checks another name (tls_server_name) fails saying TLS failed.
TEST(GrpcTls, TheCertificateMustNameTheAddressOrTheOverride) {
#ifndef DATAECHO_HAVE_GRPC_PLUGIN
  GTEST_SKIP() << "this build has no gRPC plugin (TSan, or built without libgrpc++-dev)";
#endif
  if (std::system("openssl version > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "no openssl to make the test's certificates";
  const std::string d = testing::temp_dir() + "/";
  testing::write_file(d + "ext.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
  const std::string cmd =
      "(cd " + d + " && openssl req -x509 -days 2" + ec + " -keyout ca.key -out ca.pem" +
      " -subj /CN=ca && openssl req" + ec + " -keyout server.key -out server.csr" +
      " -subj /CN=localhost && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key" +
      " -CAcreateserial -days 2 -extfile ext.cnf -out server.pem) > " + d + "openssl.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(d + "openssl.log");
  auto transport = grpc_transport();
  TransportOptions server_options;
  server_options.tls_cert_pem = read_text(d + "server.pem");
  server_options.tls_key_pem = read_text(d + "server.key");
  auto server = transport->start_server("127.0.0.1:0", server_options, "", echo_handlers());
  const std::string port = std::to_string(server->port());
  TransportOptions client;
  client.tls_root_pem = read_text(d + "ca.pem");
  for (const std::string host : {"127.0.0.1", "localhost"})
    EXPECT_EQ(transport->open_channel(host + ":" + port, client)->unary(kUnary, "x"),
              std::string(kUnary) + " got x");
  client.tls_server_name = "localhost";
  EXPECT_EQ(transport->open_channel("127.0.0.1:" + port, client)->unary(kUnary, "y"),
            std::string(kUnary) + " got y");
  client.tls_server_name = "elsewhere.example";
  try {
    transport->open_channel("127.0.0.1:" + port, client)->unary(kUnary, "z", within(5'000));
    ADD_FAILURE() << "a certificate for localhost passed as elsewhere.example";
  } catch (const CallError& e) {
    EXPECT_EQ(e.call_code(), CallCode::kUnavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("TLS failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at 127.0.0.1:" + port), std::string::npos) << e.what();
  }
  server->stop(0);
}

TEST(GrpcPlugin, AMissingPluginNamesEveryPathTried) {
  try {
    load_grpc_transport({"/nonexistent/libdataecho_grpc.so", "/also/not/here.so"});
    FAIL() << "no plugin, yet it loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot load the gRPC plugin libdataecho_grpc.so"), std::string::npos)
        << what;
    EXPECT_NE(what.find("/nonexistent/libdataecho_grpc.so ("), std::string::npos) << what;
    EXPECT_NE(what.find("/also/not/here.so ("), std::string::npos) << what;
    EXPECT_NE(what.find("DATAECHO_GRPC_PLUGIN"), std::string::npos) << what;
  }
}

TEST(GrpcPlugin, ALibraryThatIsNotThePluginIsRefused) {
  try {
    load_grpc_transport({"libz.so.1"});
    FAIL() << "zlib was taken for the plugin";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libz.so.1 (no function dataecho_grpc_abi_version)"),
              std::string::npos)
        << e.what();
  }
}

TEST(GrpcPlugin, TheEnvironmentVariableComesFirst) {
  ::setenv("DATAECHO_GRPC_PLUGIN", "/opt/x/libdataecho_grpc.so", 1);
  const auto paths = grpc_plugin_paths();
  ::unsetenv("DATAECHO_GRPC_PLUGIN");
#ifdef DATAECHO_HAVE_GRPC_PLUGIN
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(paths[0], "/opt/x/libdataecho_grpc.so");
  EXPECT_EQ(paths[1], module_dir() + "/libdataecho_grpc.so");          // beside the engine's code
  EXPECT_NE(paths[3].find("libdataecho_grpc.so"), std::string::npos);  // the build's
  EXPECT_EQ(grpc_transport()->name(), "grpc");
#else
  EXPECT_TRUE(paths.empty());  // no plugin to look for: the error says why
  try {
    grpc_transport();
    FAIL() << "a build without the plugin gave a gRPC transport";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load the gRPC plugin"), std::string::npos)
        << e.what();
  }
#endif
}

TEST(ServiceProtocol, AnotherProtocolVersionNamesBothSides) {
  Hello peer = make_hello("worker");
  EXPECT_NO_THROW(check_hello(peer, "10.0.0.5", "dispatcher"));
  peer.set_protocol(kProtocolVersion + 1);
  peer.set_version("9.9.9");
  try {
    check_hello(peer, "10.0.0.5", "dispatcher");
    FAIL() << "another protocol was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker 10.0.0.5 speaks service protocol " +
                                         std::to_string(kProtocolVersion + 1) +
                                         " (dataecho 9.9.9), this dispatcher " +
                                         std::to_string(kProtocolVersion) + " (dataecho "),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dataecho::service
