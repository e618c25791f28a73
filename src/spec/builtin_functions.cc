// Map functions and predicates that need no data format: for tests, benchmarks and
// simple pipelines over `range`.
#include <chrono>
#include <set>

#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

int64_t value_of(const Example& e) {
  const Tensor& t = e.get("value");
  if (t.dtype() == DType::kInt64) return t.item<int64_t>();
  if (t.dtype() == DType::kInt32) return t.item<int32_t>();
  throw_error(ErrorCode::kInvalidArgument, "",
              std::string("field 'value' must be an integer scalar, is ") + dtype_name(t.dtype()));
}

std::set<int64_t> id_set(SpecObject& a, const std::string& key, bool required) {
  const nlohmann::json* ids = a.raw(key);
  std::set<int64_t> out;
  if (!ids) {
    if (required) throw_spec_error(a.field_path(key), "missing; expected a list of ids");
    return out;
  }
  if (!ids->is_array()) throw_spec_error(a.field_path(key), "expected a list of ids");
  for (const auto& i : *ids) {
    if (!i.is_number_integer())
      throw_spec_error(a.field_path(key), "expected a list of integer ids");
    out.insert(i.get<int64_t>());
  }
  return out;
}

// The map functions: for examples, tests and benchmarks.
// identity, square, burn and sleep.
void register_value_maps(Registry& r) {
  r.add_map_fn({"identity", "The element unchanged.", {}},
               [](SpecObject&) -> MapFn { return [](Example e, const MapContext&) { return e; }; });

  // value -> value * value
  r.add_map_fn({"square", "Field \"value\" squared (for range).", {}}, [](SpecObject&) -> MapFn {
    return [](Example e, const MapContext&) {
      int64_t v = value_of(e);
      e.set("value", Tensor::scalar<int64_t>(v * v));
      return e;
    };
  });

  // CPU-bound work: `iterations` rounds of a hash on the value (for benchmarks).
  r.add_map_fn({"burn",
                "CPU-bound work for benchmarks: rounds of a hash of \"value\" into \"hash\".",
                {{.name = "iterations",
                  .fallback = 10000,
                  .min = 0,
                  .max = int64_t{1} << 40,
                  .doc = "rounds"}}},
               [](SpecObject& a) -> MapFn {
                 int64_t iterations = a.get_int("iterations");
                 return [iterations](Example e, const MapContext&) {
                   uint64_t x = static_cast<uint64_t>(value_of(e));
                   for (int64_t i = 0; i < iterations; ++i) x = mix64(x);
                   e.set("hash", Tensor::scalar<int64_t>(static_cast<int64_t>(x)));
                   return e;
                 };
               });

  // Waits `ms` milliseconds without using the CPU, as a network read does; with
  // "ids", only for those elements.
  r.add_map_fn({"sleep",
                "Waits without using the CPU, as a network read does (for tests and "
                "benchmarks).",
                {{.name = "ms",
                  .type = OptionType::kNumber,
                  .required = true,
                  .min = 0,
                  .max = 1e9,
                  .doc = "milliseconds"},
                 {.name = "ids",
                  .type = OptionType::kJson,
                  .default_text = "every element",
                  .shape = "a list of integer ids",
                  .doc = "only for these elements"}}},
               [](SpecObject& a) -> MapFn {
                 double ms = a.get_number("ms");
                 std::set<int64_t> only = id_set(a, "ids", false);
                 return [ms, only](Example e, const MapContext& ctx) {
                   if (!only.empty() && !only.count(e.id())) return e;
                   auto d = std::chrono::nanoseconds(static_cast<int64_t>(ms * 1e6));
                   if (ctx.cancel && !ctx.cancel->sleep_for(d))
                     throw_error(ErrorCode::kCancelled, "", "cancelled");
                   return e;
                 };
               });
}

// random_noise and fail_on.
void register_test_maps(Registry& r) {
  // Adds a float32 field "noise" drawn from the element's own random stream: the
  // smallest stand-in for a random augmentation. With "size": n, a vector of n values
  // (a stand-in for an augmented image: large enough, it is computed in its batch row
  // when a batch follows; see src/ops/map_and_batch.h).
  r.add_map_fn({"random_noise",
                "Adds float32 \"noise\" from the element's own random stream: a stand-in for "
                "a random augmentation.",
                {{.name = "size",
                  .fallback = 0,
                  .min = 0,
                  .max = int64_t{1} << 30,
                  .doc = "values (0: a scalar)"}}},
               [](SpecObject& a) -> MapFn {
                 int64_t size = a.get_int("size");
                 return [size](Example e, const MapContext& ctx) {
                   Rng rng = ctx.rng_for(e);
                   if (size == 0) {
                     e.set("noise", Tensor::scalar<float>(static_cast<float>(rng.uniform01())));
                   } else {
                     e.set("noise", Tensor::make(DType::kFloat32, {size}, [&](std::byte* out) {
                             auto* v = reinterpret_cast<float*>(out);
                             for (int64_t i = 0; i < size; ++i)
                               v[i] = static_cast<float>(rng.uniform01());
                           }));
                   }
                   return e;
                 };
               });

  // Fails on the listed ids (for testing error paths).
  r.add_map_fn({"fail_on",
                "Fails on the listed ids (for testing error paths).",
                {{.name = "ids",
                  .type = OptionType::kJson,
                  .required = true,
                  .shape = "a list of integer ids",
                  .doc = "the elements to fail on"}}},
               [](SpecObject& a) -> MapFn {
                 std::set<int64_t> bad = id_set(a, "ids", true);
                 return [bad](Example e, const MapContext&) {
                   if (bad.count(e.id()))
                     throw std::runtime_error("asked to fail on id " + std::to_string(e.id()));
                   return e;
                 };
               });
}

void register_builtin_maps(Registry& r) {
  register_value_maps(r);
  register_test_maps(r);
}

void register_builtin_predicates(Registry& r) {
  r.add_predicate({"even", "Elements of even id.", {}}, [](SpecObject&) -> Predicate {
    return [](const Example& e) { return e.id() % 2 == 0; };
  });
  r.add_predicate({"odd", "Elements of odd id.", {}}, [](SpecObject&) -> Predicate {
    return [](const Example& e) { return e.id() % 2 != 0; };
  });
  r.add_predicate({"id_mod",
                   "Elements whose id % mod == eq.",
                   {{.name = "mod", .required = true, .min = 1, .doc = "the modulus"},
                    {.name = "eq", .fallback = 0, .min = 0, .doc = "the remainder, < mod"}}},
                  [](SpecObject& a) -> Predicate {
                    int64_t mod = a.get_int("mod");
                    int64_t eq = a.get_int("eq", std::nullopt, 0, mod - 1);
                    return [mod, eq](const Example& e) { return e.id() % mod == eq; };
                  });
}

}  // namespace

void register_builtin_functions(Registry& r) {
  register_builtin_maps(r);
  register_builtin_predicates(r);
}

}  // namespace dataecho
