// Each rank's check-in with the job's store (docs/distributed.md, "Failure"), for
// src/train/distributed.cc only. A thread with a store connection of its own adds 1 to
// the key beat/<rank> every second and reads every other rank's count, so that when a
// collective fails the rank knows at once which peers stopped checking in and since when,
// without a call on the store from the training thread: over a link that went silent, a
// store call never returns (the TCPStore client has no timeout on its reads).
// Thread-safety: every member may be called from any thread.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace c10d {
class TCPStore;
}

namespace dataecho::train {

class CheckIn {
 public:
  // What the last poll of the store saw.
  struct View {
    bool broken = false;  // the store connection failed (its error in `error`)
    std::string error;
    double own_age_s = 0;             // seconds since this rank's last answered round trip
    std::vector<double> age_s;        // per rank: seconds since its count last changed (own: 0)
    std::vector<int64_t> counts;      // per rank: its check-in count
    std::vector<int64_t> changed_ns;  // per rank: when a poll saw its count change
    std::map<int, std::string> announced;  // failed/<rank> messages found
  };

  // Starts the thread on `store` (a client connection that no other thread uses).
  CheckIn(c10::intrusive_ptr<c10d::TCPStore> store, int rank, int world_size);
  // Stops the thread; when a store call does not return within 2 s (a silent link), the
  // thread is left to end with the process.
  ~CheckIn();
  CheckIn(const CheckIn&) = delete;
  CheckIn& operator=(const CheckIn&) = delete;

  // Waits up to `seconds` for a poll that starts after this call (one every 0.1 s from
  // now on), and returns it; the latest one when none came (then own_age_s grows).
  View poll(double seconds);
  // Sets `key` to `value` through this connection; false when that took over `seconds`.
  bool publish(const std::string& key, const std::string& value, double seconds);
  // Whether `key` exists, per the last poll that looked (keys asked for are looked up
  // at every poll from then on).
  bool seen(const std::string& key, double seconds);

 private:
  struct Shared;
  static void run(std::shared_ptr<Shared> s);
  std::shared_ptr<Shared> s_;  // shared with the thread, which may outlive this object
  std::thread thread_;
};

}  // namespace dataecho::train
