#include "dataecho/core/stats.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace dataecho {

std::atomic<int64_t>& NodeStats::counter(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_[key];  // std::map nodes never move: the reference stays valid
}

void NodeStats::set_value(const std::string& key, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[key] = value;
}

std::map<std::string, int64_t> NodeStats::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : counters_) out[k] = v.load();
  return out;
}

std::map<std::string, double> NodeStats::values() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_;
}

int64_t NodeStats::next_ns_at(int64_t now) const {
  // next() clears the stamp before it adds the call's time: a stamp read the same before
  // and after next_ns is a call whose time next_ns does not hold yet.
  while (true) {
    const int64_t since = next_since_ns.load();
    const int64_t done = next_ns.load();
    if (next_since_ns.load() != since) continue;  // a call began or ended meanwhile
    return done + (since != 0 && now > since ? now - since : 0);
  }
}

nlohmann::json PipelineStats::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  const NodeStats* prev = nullptr;
  for (const auto& n : nodes_) {
    int64_t next_ns = n->next_ns.load();
    int64_t busy, wait_in;
    if (n->async) {
      busy = n->busy_ns.load();
      wait_in = n->wait_input_ns.load();
    } else {
      wait_in = prev ? prev->next_ns.load() : 0;
      busy = next_ns > wait_in ? next_ns - wait_in : 0;
    }
    nlohmann::json j;
    j["name"] = n->name;
    j["elements"] = n->elements.load();
    j["rows"] = n->rows.load();
    j["bytes"] = n->bytes.load();
    j["busy_ms"] = busy / 1e6;
    j["wait_input_ms"] = wait_in / 1e6;
    j["wait_output_ms"] = n->wait_output_ns.load() / 1e6;
    j["next_ms"] = next_ns / 1e6;
    j["elements_per_s"] = wall_ns_ > 0 ? n->elements.load() * 1e9 / wall_ns_ : 0.0;
    for (const auto& [k, v] : n->counters()) j["counters"][k] = v;
    for (const auto& [k, v] : n->values()) j["values"][k] = v;
    out.push_back(std::move(j));
    prev = n.get();
  }
  return out;
}

std::string PipelineStats::to_table() const {
  nlohmann::json rows = to_json();
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %12s %12s %12s %10s %10s %10s %12s\n", "node", "elements",
                "rows", "MB", "busy_ms", "wait_in", "wait_out", "elements/s");
  s += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-28s %12lld %12lld %12.3f %10.1f %10.1f %10.1f %12.0f\n",
                  r["name"].get<std::string>().c_str(),
                  static_cast<long long>(r["elements"].get<int64_t>()),
                  static_cast<long long>(r["rows"].get<int64_t>()), r["bytes"].get<int64_t>() / 1e6,
                  r["busy_ms"].get<double>(), r["wait_input_ms"].get<double>(),
                  r["wait_output_ms"].get<double>(), r["elements_per_s"].get<double>());
    s += line;
    std::string extra;
    if (r.contains("counters")) {
      for (auto it = r["counters"].begin(); it != r["counters"].end(); ++it) {
        extra += " " + it.key() + "=" + std::to_string(it.value().get<int64_t>());
      }
    }
    if (r.contains("values")) {
      for (auto it = r["values"].begin(); it != r["values"].end(); ++it) {
        char v[64];
        std::snprintf(v, sizeof v, "%.4g", it.value().get<double>());
        extra += " " + it.key() + "=" + v;
      }
    }
    if (!extra.empty()) s += "    " + extra + "\n";
  }
  return s;
}

}  // namespace dataecho
