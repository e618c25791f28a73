// Spec builder for the `echo` stage:
//   {"op": "echo", "factor": 2.5}                                  fixed / fractional
//   {"op": "echo", "factor": "adaptive", "max_factor": 6}   adaptive
//   {"op": "echo", "factor": "auto", "max_factor": 6}       adaptive, its cap set by the
//       pipeline's tuner (core/tuner.h): no repeats until tuning runs out
// The adaptive modes also take "buffer" (elements, default 1024) and "buffer_bytes"
// (default 16 MiB; 0: no byte bound): the bounds of the fresh queue and of the pool of
// repeat candidates (ops/echo.h).
// An optional "seed" overrides the node's seed derived from the spec's.
#include <cmath>

#include "dataecho/ops/echo.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

const std::string kRange = "[1, 1000000]";
// What "factor" accepts, and the options only its string modes take.
const std::string kFactors = "a number in " + kRange + ", \"adaptive\" or \"auto\"";
const std::string kModesOnly = "only for \"factor\": \"adaptive\" or \"auto\"";

DatasetPtr build_echo(SpecObject& s, DatasetPtr in, BuildContext& ctx) {
  EchoOptions o;
  o.seed = s.has("seed") ? static_cast<uint64_t>(s.get_int("seed")) : ctx.node_seed();
  const nlohmann::json* factor = s.raw("factor");
  const std::string fpath = s.field_path("factor");
  if (!factor) throw_spec_error(fpath, "missing; expected " + kFactors);
  if (factor->is_string()) {
    std::string mode = factor->get<std::string>();
    if (mode != "adaptive" && mode != "auto") {
      throw_spec_error(fpath, "unknown echo mode \"" + mode + "\"; expected " + kFactors);
    }
    o.adaptive = true;
    o.autotune = mode == "auto";
    o.max_factor = s.get_number("max_factor");
    o.buffer = s.get_int("buffer");
    o.buffer_bytes = s.get_int("buffer_bytes");
  } else {
    if (!factor->is_number()) {
      throw_spec_error(fpath, "expected " + kFactors + ", got " + describe_json(*factor));
    }
    double f = factor->get<double>();
    if (!std::isfinite(f) || f < 1 || f > kMaxEchoFactor) {
      throw_spec_error(fpath, "expected a number in " + kRange + " (1 repeats nothing), got " +
                                  describe_json(*factor));
    }
    o.factor = f;
    if (s.has("max_factor")) {
      throw_spec_error(s.field_path("max_factor"), kModesOnly + "; a numeric factor is exact");
    }
    for (const char* f : {"buffer", "buffer_bytes"}) {
      if (s.has(f))
        throw_spec_error(s.field_path(f), kModesOnly + "; a fixed echo holds one element");
    }
  }
  return make_echo(std::move(in), o);
}

}  // namespace

void register_echo_builders(Registry& r) {
  const EchoOptions d;
  r.add_stage(
      {"echo",
       "Data echoing: repeats every element `factor` times in all, or adaptively while "
       "the next fresh element is late (docs/echo.md). Place it right after the slowest "
       "stage (the paper's rule; `dataecho profile` measures it): before the augmentation "
       "(example echoing) each copy is augmented differently, and a shuffle after it keeps "
       "copies out of one batch; after the batch (batch echoing) whole batches repeat. "
       "Choose `factor` about R = upstream time / training-step time: more repeats than R "
       "buy no time. With \"auto\" it repeats nothing until the tuner has raised every "
       "\"auto\" parallelism and buffer as far as helps and the training loop still "
       "waits. A small `buffer` makes an adaptive echo repeat while the reader stalls "
       "between a network's bursts, so that it settles above R.",
       {{.name = "factor",
         .type = OptionType::kFactor,
         .required = true,
         .min = 1,
         .max = kMaxEchoFactor,
         .choices = {"adaptive", "auto"},
         .doc = "copies in all (2.5: two, a third with p = 0.5); \"adaptive\": repeats only "
                "while the input is late; \"auto\": adaptive, its cap set by the tuner"},
        {.name = "max_factor",
         .type = OptionType::kNumber,
         .fallback = d.max_factor,
         .min = 1,
         .max = kMaxEchoFactor,
         .doc = "adaptive and auto: at most this many copies"},
        {.name = "buffer",
         .fallback = d.buffer,
         .min = 1,
         .max = 1 << 20,
         .doc = "adaptive and auto: elements in the fresh queue and the repeat pool"},
        {.name = "buffer_bytes",
         .fallback = d.buffer_bytes,
         .min = 0,
         .max = int64_t{1} << 40,
         .doc = "adaptive and auto: bytes of each (0: no byte bound)"},
        seed_option("the fractional and adaptive draws")}},
      build_echo);
}

}  // namespace dataecho
