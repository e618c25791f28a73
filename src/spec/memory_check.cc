// The memory check's watches (core/memory_watch.h), armed stage by stage as a pipeline
// is built: which stages hold many elements, how many, and, where the spec says it, how
// large their elements are at least.
#include "dataecho/spec/memory_check.h"

#include <memory>

#include "dataecho/core/memory_watch.h"
#include "dataecho/core/stats.h"

namespace dataecho {
namespace {

std::optional<int64_t> int_option(const nlohmann::json& stage, const char* key) {
  auto it = stage.find(key);
  if (it == stage.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// An image size as the spec writes it (S, [H, W] or {"size": ...}): H * W.
std::optional<double> pixels(const nlohmann::json& v) {
  if (v.is_object() && v.contains("size")) return pixels(v.at("size"));
  if (v.is_number_integer()) return static_cast<double>(v.get<int64_t>()) * v.get<int64_t>();
  if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer())
    return static_cast<double>(v[0].get<int64_t>()) * v[1].get<int64_t>();
  return std::nullopt;
}

// The least size of what an image map function makes, where its args fix it: the crop's
// pixels, one channel at least, float32 when it normalizes. "" when they do not.
std::optional<std::pair<double, std::string>> known_output(const nlohmann::json& stage) {
  const std::string fn = stage.value("fn", "");
  if (fn != "decode_augment" && fn != "augment") return std::nullopt;
  const nlohmann::json args = stage.value("args", nlohmann::json::object());
  std::optional<double> px;
  std::string by;
  for (const char* key : {"center_crop", "random_resized_crop"}) {
    if (!px && args.contains(key) && (px = pixels(args.at(key)))) by = key;
  }
  if (!px && args.contains("resize") && args.at("resize").is_array() &&
      (px = pixels(args.at("resize"))))
    by = "resize";
  if (!px) return std::nullopt;
  const bool normalizes = args.contains("normalize") && args.at("normalize") != false;
  const double channels = static_cast<double>(
      args.value("channels", int64_t{1}) > 0 ? args.value("channels", int64_t{1}) : 1);
  return std::make_pair(*px * channels * (normalizes ? 4.0 : 1.0),
                        fn + "'s " + by + (normalizes ? ", float32" : ", uint8") + ", at least " +
                            (channels > 1 ? std::to_string(static_cast<int>(channels)) : "one") +
                            " channel" + (channels > 1 ? "s" : ""));
}

void watch(const DatasetPtr& node, const std::shared_ptr<const MemoryWatch>& w) {
  if (node && node->node_stats()) node->node_stats()->watches.push_back(w);
}

}  // namespace

void arm_memory_watch(const nlohmann::json& stage, const DatasetPtr& in, const DatasetPtr& out,
                      const MemoryCheckOptions& options, KnownSize& known) {
  if (memory_action(options) == MemoryAction::kOff) {
    return;
  }
  const std::string op = stage.value("op", "");
  const std::string label = out ? out->label() : op;
  // What the stage holds, of which elements: its input's (shuffle, prefetch) or its
  // own output's (a map's buffer of results).
  std::optional<int64_t> capacity;
  bool holds_output = false;
  if (op == "shuffle" || op == "prefetch") {
    capacity = int_option(stage, "buffer");
  } else if (op == "map") {
    const auto it = stage.find("parallelism");
    const bool auto_set = (it != stage.end() && it->is_string()) ||
                          (stage.contains("buffer") && stage.at("buffer").is_string());
    if (!auto_set) {
      const int64_t p = int_option(stage, "parallelism").value_or(1);
      capacity = p + int_option(stage, "buffer").value_or(std::max<int64_t>(16, p));
      holds_output = true;
    }
  }
  // The known size after this stage.
  KnownSize after = known;
  if (op == "map") {
    after.reset();
    if (auto k = known_output(stage)) after = std::make_pair(k->first, k->second);
  } else if (op == "batch") {
    if (known)
      after = std::make_pair(
          known->first * static_cast<double>(int_option(stage, "size").value_or(1)),
          known->second + ", a batch of " + std::to_string(int_option(stage, "size").value_or(1)));
  } else if (op != "shuffle" && op != "prefetch" && op != "repeat" && op != "take" &&
             op != "skip" && op != "shard" && op != "filter" && op != "echo") {
    after.reset();
  }
  if (capacity && *capacity > 0) {
    auto w = std::make_shared<const MemoryWatch>(
        label,
        (holds_output ? "its buffer of results, " : "its buffer of ") + std::to_string(*capacity) +
            " elements",
        *capacity, options);
    const KnownSize& held = holds_output ? after : known;
    if (held) w->observe_known(held->first, held->second);
    watch(holds_output ? out : in, w);
  }
  known = after;
}

}  // namespace dataecho
