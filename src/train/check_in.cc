// CheckIn (check_in.h): a thread that checks in with the store every second.
#include "check_in.h"

#ifdef DATAECHO_HAVE_GLOO

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <utility>

#include "dataecho/core/clock.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace dataecho::train {
namespace {

constexpr auto kInterval = std::chrono::seconds(1);
constexpr auto kFastInterval = std::chrono::milliseconds(100);  // once someone waits

std::string key(const char* what, int r) { return std::string(what) + "/" + std::to_string(r); }

}  // namespace

struct CheckIn::Shared {
  c10::intrusive_ptr<c10d::TCPStore> store;
  int rank = 0;
  int world = 1;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false, done = false, fast = false, wake = false;
  View view;                  // without the ages, which poll() computes
  int64_t last_ok_ns = 0;     // when the last poll ended
  int64_t last_start_ns = 0;  // when the last poll that ended had started
  std::vector<std::pair<std::string, std::string>> to_set;
  uint64_t sets_asked = 0, sets_done = 0;
  std::set<std::string> watched, found;

  // Waits (lock held) up to `seconds` for a poll that started at or after `since_ns`.
  void await_poll(std::unique_lock<std::mutex>& lock, int64_t since_ns, double seconds) {
    fast = true;
    wake = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::duration<double>(seconds),
                [&] { return done || last_start_ns >= since_ns; });
  }
};

CheckIn::CheckIn(c10::intrusive_ptr<c10d::TCPStore> store, int rank, int world_size)
    : s_(std::make_shared<Shared>()) {
  s_->store = std::move(store);
  s_->rank = rank;
  s_->world = world_size;
  s_->view.counts.assign(static_cast<size_t>(world_size), -1);
  s_->view.changed_ns.assign(static_cast<size_t>(world_size), now_ns());
  s_->last_ok_ns = now_ns();
  thread_ = std::thread(run, s_);
}

CheckIn::~CheckIn() {
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->stop = true;
  s_->cv.notify_all();
  const bool ended = s_->cv.wait_for(lock, std::chrono::seconds(2), [&] { return s_->done; });
  lock.unlock();
  if (ended)
    thread_.join();
  else
    thread_.detach();  // blocked in a store call that will not return: it ends with the process
}

// One poll: pending sets, this rank's beat, every rank's count, the announcements and the
// watched keys while someone waits. Throws what the store throws.
static void poll_once(CheckIn::View& seen, c10d::TCPStore& store, int rank, bool fast,
                      std::vector<std::pair<std::string, std::string>>& sets,
                      std::set<std::string>& watched) {
  for (auto& [k, v] : sets) store.set(k, std::vector<uint8_t>(v.begin(), v.end()));
  store.add(key("beat", rank), 1);
  const int64_t t = now_ns();
  std::vector<int64_t>& counts = seen.counts;
  for (size_t r = 0; r < counts.size(); ++r) {
    const int64_t c = store.add(key("beat", static_cast<int>(r)), 0);
    if (c != counts[r]) seen.changed_ns[r] = t;
    counts[r] = c;
  }
  if (!fast) return;
  for (size_t r = 0; r < counts.size(); ++r) {
    const std::string k = key("failed", static_cast<int>(r));
    if (static_cast<int>(r) == rank || seen.announced.count(static_cast<int>(r)) ||
        !store.check({k}))
      continue;
    const std::vector<uint8_t> m = store.get(k);
    seen.announced[static_cast<int>(r)] = std::string(m.begin(), m.end());
  }
  for (auto it = watched.begin(); it != watched.end();)
    it = store.check({*it}) ? std::next(it) : watched.erase(it);
}

void CheckIn::run(std::shared_ptr<Shared> s) {
  std::unique_lock<std::mutex> lock(s->mu);
  while (!s->stop) {
    const int64_t start = now_ns();
    s->wake = false;
    std::vector<std::pair<std::string, std::string>> sets = std::move(s->to_set);
    s->to_set.clear();
    const uint64_t asked = s->sets_asked;
    std::set<std::string> watched = s->watched;
    for (const std::string& k : s->found) watched.erase(k);
    View seen = s->view;
    const bool fast = s->fast;
    lock.unlock();
    std::string error;
    try {
      poll_once(seen, *s->store, s->rank, fast, sets, watched);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    if (!error.empty()) {
      s->view.broken = true;
      s->view.error = error.substr(0, error.find('\n'));
      break;
    }
    s->view = std::move(seen);
    s->found.insert(watched.begin(), watched.end());
    s->sets_done = asked;
    s->last_ok_ns = now_ns();
    s->last_start_ns = start;
    s->cv.notify_all();
    s->cv.wait_for(lock, s->fast ? std::chrono::duration<double>(kFastInterval) : kInterval,
                   [&] { return s->stop || s->wake || s->sets_asked > s->sets_done; });
  }
  s->done = true;
  s->cv.notify_all();
}

CheckIn::View CheckIn::poll(double seconds) {
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->await_poll(lock, now_ns(), seconds);
  View v = s_->view;
  const int64_t t = now_ns();
  v.own_age_s = (t - s_->last_ok_ns) / 1e9;
  v.age_s.clear();
  for (size_t r = 0; r < v.changed_ns.size(); ++r)
    v.age_s.push_back(static_cast<int>(r) == s_->rank ? 0.0 : (t - v.changed_ns[r]) / 1e9);
  return v;
}

bool CheckIn::publish(const std::string& k, const std::string& value, double seconds) {
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->to_set.emplace_back(k, value);
  const uint64_t id = ++s_->sets_asked;
  s_->cv.notify_all();
  return s_->cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
    return s_->done || s_->sets_done >= id;
  }) && s_->sets_done >= id;
}

bool CheckIn::seen(const std::string& k, double seconds) {
  std::unique_lock<std::mutex> lock(s_->mu);
  if (s_->found.count(k)) return true;
  s_->watched.insert(k);
  s_->await_poll(lock, now_ns(), seconds);
  return s_->found.count(k) > 0;
}

}  // namespace dataecho::train

#endif  // DATAECHO_HAVE_GLOO
