// The trainer's records as JSON: an evaluation (evals.jsonl, the checkpoint) and a run's
// result (summary.json, the experiment runner's result files).
#include "dataecho/train/trainer.h"

#include <cmath>

#include "run_io.h"

namespace dataecho::train {

using run_io::opt_json;

double EvalRecord::bits_per_byte() const { return loss / std::log(2.0); }

nlohmann::json EvalRecord::to_json() const {
  nlohmann::json j = {{"step", step},
                      {"fresh", fresh},
                      {"echoed", echoed},
                      {"raw_reads", raw_reads},
                      {"train_seconds", train_seconds},
                      {"wall_seconds", wall_seconds},
                      {"accuracy", accuracy},
                      {"loss", loss},
                      {"examples", examples},
                      {"train_loss", train_loss},
                      {"lr", lr}};
  if (tokens > 0) {  // a language model's
    j["tokens"] = tokens;
    j["bits_per_byte"] = bits_per_byte();
  }
  return j;
}

EvalRecord EvalRecord::from_json(const nlohmann::json& j) {
  EvalRecord r;
  r.step = j.at("step").get<int64_t>();
  r.fresh = j.at("fresh").get<int64_t>();
  r.echoed = j.at("echoed").get<int64_t>();
  r.raw_reads = j.value("raw_reads", int64_t{0});
  r.train_seconds = j.at("train_seconds").get<double>();
  r.wall_seconds = j.at("wall_seconds").get<double>();
  r.accuracy = j.at("accuracy").get<double>();
  r.loss = j.at("loss").get<double>();
  r.examples = j.at("examples").get<int64_t>();
  r.train_loss = j.at("train_loss").get<double>();
  r.lr = j.at("lr").get<double>();
  r.tokens = j.value("tokens", int64_t{0});
  return r;
}

nlohmann::json TrainResult::to_json() const {
  nlohmann::json j;
  j["stop_reason"] = stop_reason;
  j["reached_target"] = reached_target;
  j["steps"] = steps;
  j["fresh"] = fresh;
  j["echoed"] = echoed;
  j["raw_reads"] = raw_reads;
  j["fresh_by_echo_index"] = fresh_by_echo_index;
  j["batch_duplicates"] = batch_duplicates;
  j["batch_duplicate_rate"] = fresh + echoed > 0 ? static_cast<double>(batch_duplicates) /
                                                       static_cast<double>(fresh + echoed)
                                                 : 0.0;
  j["raw_reads_to_target"] = opt_json(raw_reads_to_target);
  j["steps_to_target"] = opt_json(steps_to_target);
  j["fresh_to_target"] = opt_json(fresh_to_target);
  j["seconds_to_target"] = opt_json(seconds_to_target);
  j["wall_seconds_to_target"] = opt_json(wall_seconds_to_target);
  j["wall_seconds"] = wall_seconds;
  j["startup_seconds"] = startup_seconds;
  j["peak_rss_mib"] = opt_json(peak_rss_mib);
  j["cpu_seconds"] = cpu_seconds;
  if (!train_cpus.empty()) j["cpu_split"] = {{"train", train_cpus}, {"pipeline", pipeline_cpus}};
  j["snapshot_seconds"] = snapshot_seconds;
  j["eval_mode"] = eval_mode;
  j["train_seconds"] = train_seconds;
  j["wait_seconds"] = wait_seconds;
  j["compute_seconds"] = compute_seconds;
  j["eval_seconds"] = eval_seconds;
  j["r_estimate"] = r_estimate;
  j["pipeline_bound"] = pipeline_bound;
  j["achieved_echo"] = achieved_echo;
  j["steps_per_second"] = train_seconds > 0 ? steps / train_seconds : 0.0;
  j["final_eval"] = final_eval ? final_eval->to_json() : nlohmann::json(nullptr);
  j["final_accuracy"] = final_eval ? nlohmann::json(final_eval->accuracy) : nlohmann::json(nullptr);
  j["final_loss"] = final_eval ? nlohmann::json(final_eval->loss) : nlohmann::json(nullptr);
  j["test_accuracy"] = test_eval ? nlohmann::json(test_eval->accuracy) : nlohmann::json(nullptr);
  j["test_examples"] = test_eval ? nlohmann::json(test_eval->examples) : nlohmann::json(nullptr);
  j["test_model"] = test_eval ? nlohmann::json(test_model) : nlohmann::json(nullptr);
  if (final_eval && final_eval->tokens > 0) {  // a language model: bits per byte, final and test
    j["final_bits_per_byte"] = final_eval->bits_per_byte();
    j["test_loss"] = test_eval ? nlohmann::json(test_eval->loss) : nlohmann::json(nullptr);
    j["test_bits_per_byte"] =
        test_eval ? nlohmann::json(test_eval->bits_per_byte()) : nlohmann::json(nullptr);
  }
  j["evaluations"] = static_cast<int64_t>(evals.size());
  j["world_size"] = world_size;
  j["communication_seconds"] = communication_seconds;
  j["ranks_identical"] = ranks_identical;
  j["input"] = input;
  j["parameters"] = parameters;
  j["pipeline_stats"] = pipeline_stats;
  return j;
}

}  // namespace dataecho::train
