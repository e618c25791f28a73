#include "spec/service_scale.h"

#include "dataecho/service/autoscale.h"

namespace dataecho {
namespace {

std::vector<OptionDecl> scale_fields() {
  const ScaleOptions d;
  return {
      {.name = "policy",
       .type = OptionType::kString,
       .fallback = d.policy,
       .choices = {"fixed", "workers", "echo_or_scale"},
       .doc = "\"fixed\": nothing changes the workers; \"workers\": add a worker while the "
              "consumer waits, kept if the source's rate rises min_gain (Cachew's rule); "
              "\"echo_or_scale\": the workers and the \"auto\" echo's cap from the echo-or-scale "
              "model (docs/echo.md)"},
      {.name = "max_workers",
       .fallback = d.max_workers,
       .min = 1,
       .max = 1'000'000,
       .doc = "the most workers either policy asks the dispatcher for"},
      {.name = "worker_price_per_hour",
       .type = OptionType::kNumber,
       .fallback = d.worker_price_per_hour,
       .min = 0,
       .doc = "echo_or_scale: a worker's price per hour (any unit, the trainer's too)"},
      {.name = "trainer_price_per_hour",
       .type = OptionType::kNumber,
       .fallback = d.trainer_price_per_hour,
       .min = 0,
       .doc = "echo_or_scale: the trainer's price per hour (1 and workers at 0: the least time)"},
      {.name = "echo_value",
       .type = OptionType::kJson,
       .default_text = "the measured curve of docs/echo.md",
       .shape = "a list of [factor, v] pairs, factors rising above 1",
       .doc = "echo_or_scale: v(e), the examples consumed to the target at factor e relative "
              "to e = 1"},
      {.name = "switch_gain",
       .type = OptionType::kNumber,
       .fallback = d.switch_gain,
       .min = 0,
       .max = 0.999,
       .doc = "echo_or_scale: a switch only to a choice this share cheaper"},
      {.name = "min_interval_s",
       .type = OptionType::kNumber,
       .fallback = d.min_interval_s,
       .min = 0,
       .doc = "echo_or_scale: at most one switch per this many seconds"},
      {.name = "measure_s",
       .type = OptionType::kNumber,
       .fallback = d.measure_s,
       .min = 0.001,
       .doc = "echo_or_scale: the demand is measured over spans of at least this many "
              "seconds, with a quarter of it outside the consumer's next()"},
      {.name = "min_gain",
       .type = OptionType::kNumber,
       .fallback = d.min_gain,
       .min = 0,
       .doc = "workers: a worker is kept when the source's rate rose by this share"},
      {.name = "settle_s",
       .type = OptionType::kNumber,
       .fallback = d.settle_s,
       .min = 0.001,
       .doc = "workers: a new worker is judged this many seconds after it serves"},
      {.name = "start_timeout_s",
       .type = OptionType::kNumber,
       .fallback = d.start_timeout_s,
       .min = 0.001,
       .doc = "workers: a worker not serving by then is taken back"},
      {.name = "retry_after_s",
       .type = OptionType::kNumber,
       .fallback = d.retry_after_s,
       .min = 0,
       .doc = "workers: no worker is added for this long after one was taken back"}};
}

std::vector<EchoValuePoint> read_curve(const nlohmann::json& j, const std::string& path) {
  if (!j.is_array())
    throw_spec_error(path, "expected a list of [factor, v] pairs, got " + describe_json(j));
  std::vector<EchoValuePoint> curve;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& p = j[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      throw_spec_error(path + "[" + std::to_string(i) + "]",
                       "expected a pair [factor, v] of numbers, got " + describe_json(p));
    curve.push_back({p[0].get<double>(), p[1].get<double>()});
  }
  return curve;
}

}  // namespace

OptionDecl service_scale_option() {
  return {.name = "scale",
          .type = OptionType::kObject,
          .fields = scale_fields(),
          .doc =
              "what changes the number of workers, and with policy echo_or_scale the "
              "\"auto\" echo's cap (docs/service.md, \"Echo or scale\")"};
}

ScaleOptions read_scale_options(SpecObject& s) {
  ScaleOptions o;
  SpecObject c = s.get_object("scale");
  o.policy = c.get_string("policy");
  o.max_workers = c.get_int("max_workers");
  o.worker_price_per_hour = c.get_number("worker_price_per_hour");
  o.trainer_price_per_hour = c.get_number("trainer_price_per_hour");
  if (const nlohmann::json* curve = c.raw("echo_value"))
    o.echo_value = read_curve(*curve, c.field_path("echo_value"));
  o.switch_gain = c.get_number("switch_gain");
  o.min_interval_s = c.get_number("min_interval_s");
  o.measure_s = c.get_number("measure_s");
  o.min_gain = c.get_number("min_gain");
  o.settle_s = c.get_number("settle_s");
  o.start_timeout_s = c.get_number("start_timeout_s");
  o.retry_after_s = c.get_number("retry_after_s");
  c.finish();
  try {
    check_scale_options(o, c.path());
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "spec", e.message());  // it names the field
  }
  return o;
}

std::shared_ptr<ScalePolicy> make_scale_policy(SpecObject& s,
                                               const service::ServiceSourceOptions& o) {
  ScaleOptions scale = read_scale_options(s);
  if (scale.policy == "fixed") return nullptr;
  if (o.sharding == "off")
    throw_spec_error(s.field_path("scale") + ".policy",
                     "policy \"" + scale.policy +
                         "\" needs sharding \"dynamic\" or \"static\": in \"off\" each worker "
                         "makes a whole pass, and a consumer reads the workers listed at its "
                         "epoch's start");
  return std::make_shared<ScalePolicy>(
      std::move(scale), service::dispatcher_scaler(o.dispatcher, o.token, o.tls, o.transport));
}

}  // namespace dataecho
