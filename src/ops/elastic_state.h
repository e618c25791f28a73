// The state of an elastic merge (ops/elastic.h): its JSON header, the lane blobs after
// it, and the row views that put collated rows back into their lanes. Internal to
// src/ops.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataecho/core/example.h"
#include "dataecho/core/state.h"
#include "dataecho/ops/elastic.h"

namespace dataecho::elastic_state {

inline constexpr const char* kFormat = "dataecho-elastic/1";
inline constexpr const char* kTag = "elastic";
inline constexpr const char* kLaneTag = "elastic lane";

// The root node's part of a Pipeline state: the tag, the header as JSON text, then one
// blob per entry of the header's "lane_state", in that order.
struct RootState {
  nlohmann::json header;
  std::vector<std::string> blobs;
};
void write_root(StateWriter& w, const RootState& state);
// Reads what write_root wrote; `label` names the node in errors.
RootState read_root(StateReader& r, const std::string& label);

// Each row of a batch as one element viewing the batch's buffers (no copy), with the
// row's id, echo index and epoch.
std::vector<Example> row_views(const Example& batch);

// The plan as the header writes it, and the check that a saved plan is this one's
// (lanes, pieces per lane, seed, and each shard's uri, records and bytes).
nlohmann::json plan_json(const ElasticPlan& plan);
void check_plan(const nlohmann::json& saved, const ElasticPlan& plan, const std::string& label);

// Consumer w of W of rank r of N, as the merge reads: consumer r + N w of N W, global
// batch G W.
ElasticBatchOptions consumer_view(const ElasticBatchOptions& o);

// "1, 4, 7".
std::string join(const std::vector<int64_t>& values);

}  // namespace dataecho::elastic_state
