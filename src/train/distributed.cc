// Collective over c10d's ProcessGroupGloo and TCPStore (docs/distributed.md). What is
// ours: reading torchrun's environment, checking that the ranks agree on the job, and
// naming the rank that was lost when a collective fails. Everything that moves data
// between processes is PyTorch's.
#include "dataecho/train/distributed.h"

#include <signal.h>

#include <charconv>
#include <cstdlib>

#include "dataecho/core/clock.h"
#include "dataecho/core/error.h"
#include "dataecho/train/model.h"

#ifdef DATAECHO_HAVE_GLOO
#include "check_in.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace dataecho::train {
namespace {

constexpr const char* kStage = "distributed";

[[noreturn]] void fail(ErrorCode code, const std::string& message) {
  throw Error(code, kStage, message);
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int64_t env_int(const char* name, int64_t lo, int64_t hi) {
  const char* v = env(name);
  int64_t out = 0;
  const char* end = v + std::strlen(v);
  auto [p, ec] = std::from_chars(v, end, out);
  if (ec != std::errc() || p != end || out < lo || out > hi) {
    fail(ErrorCode::kInvalidArgument, std::string(name) + "=" + v + ": expected an integer in [" +
                                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return out;
}

}  // namespace

std::optional<DistributedOptions> distributed_from_env() {
  if (!env("WORLD_SIZE")) {
    if (env("RANK"))
      fail(ErrorCode::kInvalidArgument,
           "RANK is set but WORLD_SIZE is not: set both (torchrun's convention), or neither "
           "for one process");
    return std::nullopt;
  }
  DistributedOptions o;
  o.world_size = static_cast<int>(env_int("WORLD_SIZE", 1, 65536));
  if (!env("RANK"))
    fail(ErrorCode::kInvalidArgument,
         "WORLD_SIZE=" + std::to_string(o.world_size) + " is set but RANK is not");
  o.rank = static_cast<int>(env_int("RANK", 0, 65535));
  if (o.rank >= o.world_size)
    fail(ErrorCode::kInvalidArgument,
         "RANK=" + std::to_string(o.rank) +
             " is not below WORLD_SIZE=" + std::to_string(o.world_size));
  o.local_rank = env("LOCAL_RANK") ? static_cast<int>(env_int("LOCAL_RANK", 0, 65535)) : o.rank;
  if (!env("MASTER_ADDR"))
    fail(ErrorCode::kInvalidArgument,
         "MASTER_ADDR is not set: the address of rank 0's machine, which every rank can reach "
         "(127.0.0.1 on one machine)");
  o.master_addr = env("MASTER_ADDR");
  if (!env("MASTER_PORT"))
    fail(ErrorCode::kInvalidArgument,
         "MASTER_PORT is not set: a free TCP port on MASTER_ADDR where rank 0 listens");
  o.master_port = static_cast<int>(env_int("MASTER_PORT", 1, 65535));
  if (const char* t = env("DATAECHO_DIST_TIMEOUT")) {
    char* end = nullptr;
    o.timeout_seconds = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(o.timeout_seconds > 0))
      fail(ErrorCode::kInvalidArgument,
           std::string("DATAECHO_DIST_TIMEOUT=") + t + ": expected seconds > 0");
  }
  return o;
}

#ifndef DATAECHO_HAVE_GLOO

void require_distributed() {
  fail(ErrorCode::kInvalidArgument,
       "this build has no c10d Gloo backend: install libgloo-dev (scripts/bootstrap.sh does) "
       "and rebuild");
}

std::shared_ptr<Collective> Collective::connect(const DistributedOptions&) {
  require_distributed();
  return nullptr;  // not reached
}

#else

void require_distributed() {}

namespace {

// A peer whose check-in count has not changed for this long (the check-in is every
// second) is lost; so is the store, for a rank whose own check-in went unanswered as long.
constexpr double kLostAfterSeconds = 3;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::string str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

class GlooCollective final : public Collective {
 public:
  explicit GlooCollective(const DistributedOptions& o) : o_(o) {
    const std::string where = o.master_addr + ":" + std::to_string(o.master_port);
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(o.master_port);
    so.isServer = o.rank == 0;
    so.numWorkers = static_cast<size_t>(o.world_size);
    so.waitWorkers = true;
    so.timeout = millis(o.timeout_seconds);
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
    } catch (const std::exception& e) {
      if (o.rank == 0) {
        fail(ErrorCode::kIo, "rank 0 cannot host the rendezvous on " + where +
                                 " (MASTER_ADDR:MASTER_PORT): the port is in use, or the "
                                 "address is not this machine's, or fewer than WORLD_SIZE=" +
                                 std::to_string(o.world_size) + " ranks came within " +
                                 seconds_text() + ": " + first_line(e.what()));
      }
      fail(ErrorCode::kIo, "rank " + std::to_string(o.rank) +
                               " cannot reach rank 0's rendezvous at " + where + " within " +
                               seconds_text() + ": " + first_line(e.what()));
    }
    check_world_size();
    start_check_in();
    // Gloo writes to its peers with writev, which raises SIGPIPE on a connection that a
    // dead peer reset: by default that ends this rank at once and without a word. Ignored,
    // the write fails, the collective throws, and this rank names the peer that was lost.
    ::signal(SIGPIPE, SIG_IGN);
    auto options = c10d::ProcessGroupGloo::Options::create(millis(o.timeout_seconds));
    if (const char* ifname = env("GLOO_SOCKET_IFNAME"))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (is_loopback(o.master_addr))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 1;
    guarded("connecting the process group", [&] {
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, o.rank, o.world_size, options);
    });
  }

  int rank() const override { return o_.rank; }
  int world_size() const override { return o_.world_size; }

  void sum(std::vector<double>& values) override { reduce(values, c10d::ReduceOp::SUM); }
  void max(std::vector<double>& values) override { reduce(values, c10d::ReduceOp::MAX); }

  void broadcast(std::string& data, int root) override {
    guarded("broadcast", [&] {
      std::vector<at::Tensor> size{torch::tensor({static_cast<int64_t>(data.size())})};
      c10d::BroadcastOptions bo;
      bo.rootRank = root;
      pg_->broadcast(size, bo)->wait();
      const int64_t n = size[0].item<int64_t>();
      std::vector<at::Tensor> buf{torch::empty({std::max<int64_t>(n, 1)}, torch::kUInt8)};
      if (o_.rank == root) std::memcpy(buf[0].data_ptr(), data.data(), data.size());
      pg_->broadcast(buf, bo)->wait();
      data.assign(static_cast<const char*>(buf[0].data_ptr()), static_cast<size_t>(n));
    });
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    std::vector<std::string> out;
    guarded("all_gather", [&] {
      std::vector<double> sizes(static_cast<size_t>(o_.world_size), 0.0);
      sizes[static_cast<size_t>(o_.rank)] = static_cast<double>(mine.size());
      reduce_unguarded(sizes, c10d::ReduceOp::SUM);
      int64_t longest = 1;
      for (double s : sizes) longest = std::max(longest, static_cast<int64_t>(s));
      std::vector<at::Tensor> in{torch::zeros({longest}, torch::kUInt8)};
      std::memcpy(in[0].data_ptr(), mine.data(), mine.size());
      std::vector<std::vector<at::Tensor> > all(1);
      for (int r = 0; r < o_.world_size; ++r)
        all[0].push_back(torch::empty({longest}, torch::kUInt8));
      pg_->allgather(all, in)->wait();
      for (int r = 0; r < o_.world_size; ++r)
        out.emplace_back(static_cast<const char*>(all[0][static_cast<size_t>(r)].data_ptr()),
                         static_cast<size_t>(sizes[static_cast<size_t>(r)]));
    });
    return out;
  }

  void broadcast_model(ClassifierImpl& model) override {
    std::vector<at::Tensor> all = model.parameters();
    for (auto& b : model.buffers()) all.push_back(b);
    broadcast_tensors(all);
  }

  void average_gradients(ClassifierImpl& model, float& loss, std::vector<float>& sums,
                         std::optional<int64_t> rows) override {
    const int64_t t0 = now_ns();
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> params = model.parameters();
    std::vector<at::Tensor> flat;
    flat.reserve(params.size() + 1);
    for (auto& p : params) {
      const at::Tensor& g = p.grad();
      flat.push_back(g.defined() ? g.reshape({-1}) : torch::zeros({p.numel()}, p.options()));
    }
    flat.push_back(torch::tensor({loss}, torch::kFloat32));
    int64_t averaged = 1;  // the gradients and the loss
    for (auto& p : params) averaged += p.numel();
    const int64_t n_sums = static_cast<int64_t>(sums.size());
    if (n_sums > 0) flat.push_back(torch::from_blob(sums.data(), {n_sums}, torch::kFloat32));
    // Rank 0's float buffers, zeros elsewhere: their sum is rank 0's, exactly.
    std::vector<at::Tensor> buffers;
    for (auto& b : model.buffers())
      if (b.scalar_type() == torch::kFloat32) buffers.push_back(b);
    for (auto& b : buffers)
      flat.push_back(o_.rank == 0 ? b.detach().reshape({-1}) : torch::zeros({b.numel()}));
    // Weighted by rows: the rows go last, and their sum divides.
    if (rows) flat.push_back(torch::tensor({static_cast<float>(*rows)}, torch::kFloat32));
    std::vector<at::Tensor> bucket{torch::cat(flat)};
    if (rows) bucket[0].narrow(0, 0, averaged).mul_(static_cast<double>(*rows));
    guarded("averaging the gradients", [&] { pg_->allreduce(bucket)->wait(); });
    if (n_sums > 0)
      std::memcpy(sums.data(), bucket[0].narrow(0, averaged, n_sums).data_ptr(),
                  sums.size() * sizeof(float));
    int64_t from = averaged + n_sums;
    for (auto& b : buffers) {
      b.detach().copy_(bucket[0].narrow(0, from, b.numel()).view(b.sizes()));
      from += b.numel();
    }
    const double total_rows = rows ? bucket[0][bucket[0].numel() - 1].item<double>() : 0.0;
    bucket[0]
        .narrow(0, 0, averaged)
        .div_(rows ? std::max(total_rows, 1.0) : static_cast<double>(o_.world_size));
    int64_t at = 0;
    for (auto& p : params) {
      const int64_t n = p.numel();
      at::Tensor part = bucket[0].narrow(0, at, n).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(part);
      else
        p.mutable_grad() = part.clone();
      at += n;
    }
    loss = bucket[0][at].item<float>();
    comm_s_ += (now_ns() - t0) / 1e9;
  }

  // A rank's own error is left in the store, and its process group closed, so that the
  // others' collectives fail at once and their errors name this rank and the reason.
  // After a collective failed, each rank names the culprit itself: nothing to leave.
  // Rank 0 hosts the store: it waits until the ranks still checking in have diagnosed.
  void announce_failure(const std::string& message) override {
    const double bound = std::min(5.0, o_.timeout_seconds);
    if (!broken_) {
      check_in_->publish(key("failed", o_.rank), message, bound);
      pg_.reset();
    }
    if (o_.rank != 0) return;
    const int64_t deadline = now_ns() + static_cast<int64_t>(bound * 1e9);
    const double lost_after = std::min(kLostAfterSeconds, o_.timeout_seconds);
    for (int r = 1; r < o_.world_size && now_ns() < deadline; ++r) {
      while (now_ns() < deadline && !check_in_->seen(key("diagnosed", r), 0.5)) {
        const CheckIn::View v = check_in_->poll(0.5);
        if (v.broken || v.age_s[static_cast<size_t>(r)] > lost_after) break;  // not coming
      }
    }
  }

  double communication_seconds() const override { return comm_s_; }

 private:
  static std::string first_line(const std::string& s) {
    const size_t nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
  }
  std::string seconds_text() const {
    char b[32];
    std::snprintf(b, sizeof b, "%g s", o_.timeout_seconds);
    return b;
  }
  static std::string key(const char* what, int r) {
    return std::string(what) + "/" + std::to_string(r);
  }

  // Every rank publishes its WORLD_SIZE; rank 0 compares, so that a rank started with
  // another world size fails at once with a message, instead of a timeout later.
  void check_world_size() {
    const std::string mine = std::to_string(o_.world_size);
    auto check = [](int r, const std::string& theirs, const std::string& root) {
      if (theirs != root)
        fail(ErrorCode::kInvalidArgument,
             "rank " + std::to_string(r) + " was started with WORLD_SIZE=" + theirs +
                 " and rank 0 with WORLD_SIZE=" + root + ": start every rank with the same");
    };
    try {
      if (o_.rank == 0) {
        store_->set("world_size", bytes(mine));
        for (int r = 1; r < o_.world_size; ++r) check(r, str(store_->get(key("join", r))), mine);
      } else {
        store_->set(key("join", o_.rank), bytes(mine));
        check(o_.rank, mine, str(store_->get("world_size")));
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(ErrorCode::kIo, "rendezvous at " + o_.master_addr + ":" +
                               std::to_string(o_.master_port) + ": " + first_line(e.what()));
    }
  }

  void reduce_unguarded(std::vector<double>& values, c10d::ReduceOp op) {
    std::vector<at::Tensor> t{
        torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kFloat64)};
    c10d::AllreduceOptions ao;
    ao.reduceOp = op;
    pg_->allreduce(t, ao)->wait();
  }
  void reduce(std::vector<double>& values, c10d::ReduceOp op) {
    guarded("allreduce", [&] { reduce_unguarded(values, op); });
  }

  void broadcast_tensors(std::vector<at::Tensor>& tensors) {
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> flat;
    for (auto& t : tensors) flat.push_back(t.detach().reshape({-1}).to(torch::kFloat64));
    std::vector<at::Tensor> bucket{torch::cat(flat)};
    guarded("broadcasting the model", [&] { pg_->broadcast(bucket)->wait(); });
    int64_t at = 0;
    for (auto& t : tensors) {
      const int64_t n = t.numel();
      t.detach().copy_(bucket[0].narrow(0, at, n).view(t.sizes()));
      at += n;
    }
  }

  // The check-in thread's own connection to the store (check_in.h): every rank's check-in
  // count, read every second, says which peers are still there when a collective fails.
  void start_check_in() {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(o_.master_port);
    so.isServer = false;
    so.waitWorkers = false;
    so.timeout = millis(o_.timeout_seconds);
    try {
      check_in_ = std::make_unique<CheckIn>(c10::make_intrusive<c10d::TCPStore>(o_.master_addr, so),
                                            o_.rank, o_.world_size);
    } catch (const std::exception& e) {
      fail(ErrorCode::kIo, "rendezvous at " + o_.master_addr + ":" +
                               std::to_string(o_.master_port) + ": " + first_line(e.what()));
    }
  }

  // Polls the check-ins until every peer has either checked in again since the first
  // poll or been silent for `lost_after` (or a rank announced its error, or the store is
  // gone), at most `lost_after` and a second.
  CheckIn::View settle(double lost_after) {
    const int64_t start = now_ns();
    const CheckIn::View first = check_in_->poll(0.5);
    for (CheckIn::View v = first;; v = check_in_->poll(0.5)) {
      if (v.broken || v.own_age_s > lost_after || !v.announced.empty()) return v;
      bool settled = true;
      for (size_t r = 0; r < v.counts.size(); ++r)
        if (static_cast<int>(r) != o_.rank && v.age_s[r] <= lost_after &&
            v.counts[r] == first.counts[r])
          settled = false;
      if (settled || now_ns() - start > static_cast<int64_t>((lost_after + 1) * 1e9)) return v;
    }
  }

  // A collective failed: which rank is to blame? One that announced its own error, or
  // else those whose check-in stopped (killed, crashed or cut off), named at once when
  // they have been silent for kLostAfterSeconds already, or else within that time. No
  // store call from this thread: over a silent link it would never return.
  std::string diagnose() {
    const double lost_after = std::min(kLostAfterSeconds, o_.timeout_seconds);
    const CheckIn::View v = settle(lost_after);
    char age[32];
    if (v.broken || v.own_age_s > lost_after) {
      std::snprintf(age, sizeof age, "%.1f", v.own_age_s);
      return "rank 0 is lost, or this rank is cut off from it: its rendezvous store at " +
             o_.master_addr + ":" + std::to_string(o_.master_port) + " does not answer" +
             (v.broken ? " (" + v.error + ")" : std::string(" (for ") + age + " s)");
    }
    check_in_->publish(key("diagnosed", o_.rank), "1", lost_after);
    std::string message = blame(v, lost_after);
    if (o_.rank == 0) await_survivors(v, lost_after);
    return message;
  }

  // Rank 0 hosts the store, from which the other survivors read the check-ins while they
  // diagnose: it stays until each rank still checking in has diagnosed too, at most
  // `lost_after` and a second. (Leaving at once, it made a survivor under load blame
  // rank 0, whose store had gone, instead of the rank that was lost.)
  void await_survivors(const CheckIn::View& v, double lost_after) {
    const int64_t deadline = now_ns() + static_cast<int64_t>((lost_after + 1) * 1e9);
    for (int r = 1; r < o_.world_size; ++r) {
      if (v.age_s[static_cast<size_t>(r)] > lost_after) continue;
      // seen() waits for the check-in thread's next poll of the store (every 0.1 s).
      while (now_ns() < deadline && !check_in_->seen(key("diagnosed", r), 0.5)) continue;
    }
  }

  // The message of diagnose(), from a settled view: the ranks that announced an error,
  // or those that stopped checking in.
  std::string blame(const CheckIn::View& v, double lost_after) {
    char age[32];
    std::string announced;
    for (const auto& [r, m] : v.announced)
      announced += (announced.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
                   " failed: " + m;
    if (!announced.empty()) return announced;
    std::string names, left;
    double silent = 0;
    int lost = 0;
    for (int r = 0; r < o_.world_size; ++r) {
      if (r == o_.rank || v.age_s[static_cast<size_t>(r)] <= lost_after) continue;
      // Silent because it ended after diagnosing the same failure (it checked in until
      // then): not lost. Under load one survivor may exit before another diagnoses.
      if (check_in_->seen(key("diagnosed", r), 0.5)) {
        left += (left.empty() ? "" : ", ") + std::to_string(r);
        continue;
      }
      names += (names.empty() ? "" : ", ") + std::to_string(r);
      silent = std::max(silent, v.age_s[static_cast<size_t>(r)]);
      ++lost;
    }
    if (lost == 0 && !left.empty())
      return "rank(s) " + left + " ended after the same failure (their errors name the cause)";
    if (lost == 0) return "every rank still answers the store";
    std::snprintf(age, sizeof age, "%.1f", silent);
    return std::string(lost == 1 ? "rank " : "ranks ") + names + " of " +
           std::to_string(o_.world_size) + (lost == 1 ? " is" : " are") +
           " lost (no check-in for " + age + " s: killed, crashed, or its machine is unreachable)";
  }

  template <class F>
  void guarded(const char* what, F&& f) {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      broken_ = true;
      const std::string why = diagnose();
      fail(ErrorCode::kIo, "rank " + std::to_string(o_.rank) + ": " + what + " failed: " + why +
                               " (" + first_line(e.what()) + ")");
    }
  }

  DistributedOptions o_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::unique_ptr<CheckIn> check_in_;
  bool broken_ = false;  // a collective failed
  double comm_s_ = 0;
};

}  // namespace

std::shared_ptr<Collective> Collective::connect(const DistributedOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size)
    fail(ErrorCode::kInvalidArgument, "rank " + std::to_string(options.rank) +
                                          " is outside a world of " +
                                          std::to_string(options.world_size));
  if (!(options.timeout_seconds > 0))
    fail(ErrorCode::kInvalidArgument, "the timeout must be > 0 seconds");
  return std::make_shared<GlooCollective>(options);
}

#endif  // DATAECHO_HAVE_GLOO

}  // namespace dataecho::train
