#include "dataecho/core/tuner_memory.h"

#include <string>

#include "dataecho/core/error.h"

namespace dataecho {

namespace {

constexpr int kMemoVersion = 1;

[[noreturn]] void bad_memo(const std::string& what) {
  throw_error(ErrorCode::kInvalidArgument, "autotune", "tuner memo: " + what);
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) bad_memo(where + " has no \"" + key + "\"");
  return *it;
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_number()) bad_memo(where + ": \"" + key + "\" is not a number: " + v.dump());
  return v.get<double>();
}

int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_number_integer()) bad_memo(where + ": \"" + key + "\" is not an integer: " + v.dump());
  return v.get<int64_t>();
}

std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_string()) bad_memo(where + ": \"" + key + "\" is not a string: " + v.dump());
  return v.get<std::string>();
}

TunerMemo::Knob knob_from_json(const nlohmann::json& k, const std::string& where) {
  if (!k.is_object()) bad_memo(where + " is not an object: " + k.dump());
  TunerMemo::Knob out;
  out.node = text(k, "node", where);
  out.param = text(k, "param", where);
  out.value = integer(k, "value", where);
  out.blocked_until_s = number(k, "blocked_until_s", where);
  const nlohmann::json& trial = field(k, "trial", where);
  if (!trial.is_boolean()) bad_memo(where + ": \"trial\" is not a boolean: " + trial.dump());
  out.trial = trial.get<bool>();
  out.trial_from = integer(k, "trial_from", where);
  out.rate_before = number(k, "rate_before", where);
  return out;
}

}  // namespace

const TunerMemo::Knob* TunerMemo::find(const std::string& node, const std::string& param) const {
  for (const Knob& k : knobs)
    if (k.node == node && k.param == param) return &k;
  return nullptr;
}

nlohmann::json TunerMemo::to_json() const {
  nlohmann::json j;
  j["version"] = kMemoVersion;
  j["elapsed_s"] = elapsed_s;
  j["last_change_s"] = last_change_s ? nlohmann::json(*last_change_s) : nlohmann::json(nullptr);
  j["windows"] = windows;
  j["knobs"] = nlohmann::json::array();
  for (const Knob& k : knobs) {
    j["knobs"].push_back({{"node", k.node},
                          {"param", k.param},
                          {"value", k.value},
                          {"blocked_until_s", k.blocked_until_s},
                          {"trial", k.trial},
                          {"trial_from", k.trial_from},
                          {"rate_before", k.rate_before}});
  }
  return j;
}

TunerMemo TunerMemo::from_json(const nlohmann::json& j) {
  if (!j.is_object()) bad_memo("expected an object, got " + std::string(j.type_name()));
  const int64_t version = integer(j, "version", "the memo");
  if (version != kMemoVersion)
    bad_memo("version " + std::to_string(version) + ", this dataecho reads version " +
             std::to_string(kMemoVersion));
  TunerMemo m;
  m.elapsed_s = number(j, "elapsed_s", "the memo");
  const nlohmann::json& last = field(j, "last_change_s", "the memo");
  if (!last.is_null()) m.last_change_s = number(j, "last_change_s", "the memo");
  m.windows = integer(j, "windows", "the memo");
  const nlohmann::json& knobs = field(j, "knobs", "the memo");
  if (!knobs.is_array()) bad_memo("\"knobs\" is not a list: " + knobs.dump());
  for (size_t i = 0; i < knobs.size(); ++i)
    m.knobs.push_back(knob_from_json(knobs[i], "knobs[" + std::to_string(i) + "]"));
  return m;
}

TunerMemory::TunerMemory(size_t capacity) : capacity_(capacity > 0 ? capacity : 1) {}

const std::shared_ptr<TunerMemory>& TunerMemory::global() {
  // Never destroyed: a pipeline destroyed during the process's exit may still store.
  static const auto* memory = new std::shared_ptr<TunerMemory>(std::make_shared<TunerMemory>());
  return *memory;
}

std::optional<TunerMemo> TunerMemory::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void TunerMemory::store(const std::string& key, TunerMemo memo) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = index_.find(key);
  if (it != index_.end()) {
    it->second->second = std::move(memo);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(key, std::move(memo));
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void TunerMemory::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  index_.clear();
}

size_t TunerMemory::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

void clear_tuner_memory() { TunerMemory::global()->clear(); }

}  // namespace dataecho
