// The elastic merge's state: header, lane blobs, row views, and the merge of the ranks'
// states (include/dataecho/ops/elastic.h, src/ops/elastic_state.h).
#include "elastic_state.h"

#include <algorithm>
#include <map>

#include "dataecho/core/pipeline.h"

namespace dataecho {
namespace elastic_state {

void write_root(StateWriter& w, const RootState& state) {
  w.begin(kTag);
  w.write_string(state.header.dump());
  for (const std::string& blob : state.blobs) w.write_string(blob);
}

RootState read_root(StateReader& r, const std::string& label) {
  r.expect(kTag);
  RootState state;
  const std::string text = r.read_string();
  try {
    state.header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw_error(ErrorCode::kDataLoss, label,
                std::string("the elastic state's header is not JSON: ") + e.what());
  }
  if (!state.header.is_object() || state.header.value("format", "") != kFormat)
    throw_error(ErrorCode::kInvalidArgument, label,
                std::string("the elastic state is not of format ") + kFormat +
                    " (a state from a newer dataecho?)");
  const nlohmann::json& lanes = state.header.at("lane_state");
  for (size_t i = 0; i < lanes.size(); ++i) state.blobs.push_back(r.read_string());
  return state;
}

std::vector<Example> row_views(const Example& batch) {
  const size_t n = batch.num_rows();
  std::vector<Example> rows;
  rows.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const RowMeta& meta = batch.row(i);
    Example e(meta.id);
    e.set_echo(meta.echo);
    if (meta.epoch != 0) e.stamp_epoch(meta.epoch);
    for (const auto& [name, t] : batch.fields()) {
      Shape shape(t.shape().begin() + 1, t.shape().end());
      const size_t row_bytes = t.nbytes() / n;
      if (t.buffer())
        e.set(name, Tensor(t.dtype(), std::move(shape), t.buffer(), t.offset() + i * row_bytes));
      else
        e.set(name, Tensor::from_data(t.dtype(), std::move(shape), nullptr, 0));
    }
    rows.push_back(std::move(e));
  }
  return rows;
}

nlohmann::json plan_json(const ElasticPlan& plan) {
  nlohmann::json shards = nlohmann::json::array();
  for (const ShardIndex& s : plan.shards())
    shards.push_back({{"uri", s.uri}, {"records", s.records}, {"bytes", s.bytes}});
  nlohmann::json pieces = nlohmann::json::array();
  for (const Piece& piece : plan.pieces()) {
    nlohmann::json ranges = nlohmann::json::array();
    for (const RecordRange& r : piece) ranges.push_back({r.shard, r.begin, r.end, r.offset});
    pieces.push_back(std::move(ranges));
  }
  return {{"lanes", plan.lanes()},
          {"pieces_per_lane", plan.pieces_per_lane()},
          {"seed", plan.seed()},
          {"shards", std::move(shards)},
          {"pieces", std::move(pieces)}};
}

void check_plan(const nlohmann::json& saved, const ElasticPlan& plan, const std::string& label) {
  const nlohmann::json now = plan_json(plan);
  for (const char* key : {"lanes", "pieces_per_lane", "seed"}) {
    if (saved.at(key) != now.at(key))
      throw_error(ErrorCode::kInvalidArgument, label,
                  std::string("the state was saved with ") + key + " " + saved.at(key).dump() +
                      " and this pipeline has " + now.at(key).dump());
  }
  const nlohmann::json& was = saved.at("shards");
  const nlohmann::json& is = now.at("shards");
  if (was.size() != is.size())
    throw_error(ErrorCode::kInvalidArgument, label,
                "the state was saved over " + std::to_string(was.size()) +
                    " shards and this pipeline reads " + std::to_string(is.size()));
  for (size_t i = 0; i < is.size(); ++i) {
    const std::string uri = is[i].at("uri").get<std::string>();
    if (was[i].at("uri") != is[i].at("uri"))
      throw_error(ErrorCode::kInvalidArgument, label,
                  "shard " + std::to_string(i) + " was " + was[i].at("uri").dump() +
                      " when the state was saved and is " + is[i].at("uri").dump() + " now");
    for (const char* key : {"bytes", "records"}) {
      if (was[i].at(key) != is[i].at(key))
        throw_error(ErrorCode::kInvalidArgument, label,
                    "shard " + (uri.empty() ? std::to_string(i) : uri) +
                        " changed since the state was saved (" + was[i].at(key).dump() + " → " +
                        is[i].at(key).dump() + " " + key + ")");
    }
  }
}

ElasticBatchOptions consumer_view(const ElasticBatchOptions& o) {
  ElasticBatchOptions v = o;
  v.world_size = o.world_size * o.consumers_per_rank;
  v.rank = o.rank + o.world_size * o.consumer;
  v.global_batch = o.global_batch * o.consumers_per_rank;
  v.consumers_per_rank = 1;
  v.consumer = 0;
  return v;
}

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

}  // namespace elastic_state

namespace {

using elastic_state::RootState;

// One rank's Pipeline state, taken apart.
struct RankState {
  std::string fingerprint;
  int64_t returned = 0;
  std::string memo;
  RootState root;
  int64_t rank = 0;  // r + N w (saved_by), or its place in the list
  std::string name;  // "rank 1 of 3"
};

RankState read_rank_state(const std::string& bytes, size_t index) {
  const std::string who = "state " + std::to_string(index);
  StateReader r(bytes);
  RankState s;
  try {
    if (r.read_string() != Pipeline::kStateFormat)
      throw_error(ErrorCode::kInvalidArgument, "merge_elastic_states",
                  "not a pipeline state of format " + std::string(Pipeline::kStateFormat));
    s.fingerprint = r.read_string();
    s.returned = r.read_i64();
    s.memo = r.read_string();
    s.root = elastic_state::read_root(r, "merge_elastic_states");
  } catch (const Error& e) {
    throw_error(ErrorCode::kInvalidArgument, "merge_elastic_states",
                who + " is not an elastic pipeline's state: " + e.what());
  }
  if (!r.at_end())
    throw_error(ErrorCode::kDataLoss, "merge_elastic_states", who + " has trailing bytes");
  const nlohmann::json& by = s.root.header.at("saved_by");
  s.rank = by.value("rank", static_cast<int64_t>(index));
  s.name = by.contains("world_size")
               ? "rank " + std::to_string(s.rank) + " of " + by.at("world_size").dump()
               : "merged state " + std::to_string(index);
  if (by.contains("consumer")) {
    s.rank += by.at("world_size").get<int64_t>() * by.at("consumer").get<int64_t>();
    s.name +=
        ", consumer " + by.at("consumer").dump() + " of " + by.at("consumers_per_rank").dump();
  }
  return s;
}

[[noreturn]] void refuse(const std::string& why) {
  throw_error(ErrorCode::kInvalidArgument, "merge_elastic_states", why);
}

// The ranks' states agree on the pipeline and (same_step, or under batch echo) the step.
void check_states(const std::vector<RankState>& states, bool same_step) {
  const RankState& first = states[0];
  const nlohmann::json& h0 = first.root.header;
  for (const RankState& s : states) {
    const nlohmann::json& h = s.root.header;
    if (s.fingerprint != first.fingerprint || h.at("lanes") != h0.at("lanes"))
      refuse("the ranks' states come from different pipelines (" + first.name + " and " + s.name +
             "): give every rank the same seed and spec");
    if (h.at("step") == h0.at("step") && h.at("echo_copy") == h0.at("echo_copy")) continue;
    if (same_step)
      refuse(s.name + " was saved at step " + h.at("step").dump() + " (batch copy " +
             h.at("echo_copy").dump() + "), " + first.name + " at " + h0.at("step").dump() +
             " (batch copy " + h0.at("echo_copy").dump() + "): save every rank at the same step");
    if (h0.value("batch_echo", 1.0) != 1.0)
      refuse(s.name + " was saved at step " + h.at("step").dump() + ", " + first.name + " at " +
             h0.at("step").dump() +
             ": under batch echo the states must be of the same step (a batch's copies "
             "would be cut)");
  }
}

// A Pipeline state of `root`, with the fingerprint, count and memo of `like`.
std::string write_state(const RankState& like, const RootState& root) {
  StateWriter w;
  w.begin(Pipeline::kStateFormat);
  w.write_string(like.fingerprint);
  w.write_i64(like.returned);
  w.write_string(like.memo);
  elastic_state::write_root(w, root);
  return w.take();
}

}  // namespace

std::string merge_elastic_states(const std::vector<std::string>& rank_states, bool same_step) {
  if (rank_states.empty()) refuse("no states to merge");
  std::vector<RankState> states;
  for (size_t i = 0; i < rank_states.size(); ++i)
    states.push_back(read_rank_state(rank_states[i], i));
  std::stable_sort(states.begin(), states.end(),
                   [](const RankState& a, const RankState& b) { return a.rank < b.rank; });
  check_states(states, same_step);
  // Each lane's entry and blob, by lane; each lane once.
  std::map<int64_t, std::pair<nlohmann::json, std::string>> lanes;
  std::map<int64_t, std::string> owner;
  for (const RankState& s : states) {
    const nlohmann::json& entries = s.root.header.at("lane_state");
    for (size_t i = 0; i < entries.size(); ++i) {
      const int64_t lane = entries[i].at("lane").get<int64_t>();
      if (auto [it, fresh] = owner.emplace(lane, s.name); !fresh)
        refuse("lane " + std::to_string(lane) + " is in the states of " + it->second + " and " +
               s.name);
      lanes[lane] = {entries[i], s.root.blobs[i]};
    }
  }
  const int64_t k = states[0].root.header.at("lanes").get<int64_t>();
  std::vector<int64_t> missing;
  for (int64_t lane = 0; lane < k; ++lane)
    if (!lanes.count(lane)) missing.push_back(lane);
  if (!missing.empty())
    refuse(std::string(missing.size() == 1 ? "lane " : "lanes ") + elastic_state::join(missing) +
           (missing.size() == 1 ? " is" : " are") + " missing: merge the states of every rank");
  RootState merged;
  merged.header = states[0].root.header;
  merged.header["lane_state"] = nlohmann::json::array();
  merged.header["saved_by"] = {{"merged", states.size()}};
  for (const RankState& s : states)  // the earliest step (all equal when same_step)
    if (s.root.header.at("step") < merged.header.at("step"))
      merged.header["step"] = s.root.header.at("step");
  for (auto& [lane, entry] : lanes) {
    merged.header["lane_state"].push_back(entry.first);
    merged.blobs.push_back(std::move(entry.second));
  }
  return write_state(states[0], merged);
}

std::string with_lane_skips(const std::string& state, const std::map<int64_t, int64_t>& skip) {
  RankState s = read_rank_state(state, 0);
  std::map<int64_t, int64_t> left = skip;
  for (nlohmann::json& entry : s.root.header.at("lane_state")) {
    auto it = left.find(entry.at("lane").get<int64_t>());
    if (it == left.end()) continue;
    if (it->second < 0)
      refuse("cannot skip " + std::to_string(it->second) + " elements of lane " +
             std::to_string(it->first));
    entry["skip"] = entry.value("skip", int64_t{0}) + it->second;
    left.erase(it);
  }
  if (!left.empty())
    refuse("the state does not hold lane " + std::to_string(left.begin()->first) +
           ", whose elements it was asked to skip");
  return write_state(s, s.root);
}

}  // namespace dataecho
