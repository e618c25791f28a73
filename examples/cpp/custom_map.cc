// A map function and a filter of one's own, registered from C++ and used in a pipeline
// made with the fluent builder (docs/api.md). Built and run by the tests
// (example_custom_map): it prints the batches and a refused argument, and exits 0 when
// both are as expected.
#include <dataecho/dataecho.h>

#include <iostream>

int main() {
  // "scale": multiplies the int64 "value" field. Its arguments are what it reads from
  // `args`: "by", an integer in [1, 1000] (default 10). Anything else is refused.
  dataecho::register_map_function("scale", [](dataecho::SpecObject& args) -> dataecho::MapFn {
    const int64_t by = args.get_int("by", 10, 1, 1000);
    return [by](dataecho::Example e, const dataecho::MapContext&) {
      const int64_t v = e.get("value").item<int64_t>();
      e.set("value", dataecho::Tensor::scalar<int64_t>(v * by));
      return e;
    };
  });
  // "multiple_of": keeps the elements whose id is a multiple of "k".
  dataecho::register_filter("multiple_of", [](dataecho::SpecObject& args) -> dataecho::Predicate {
    const int64_t k = args.get_int("k", std::nullopt, 1);
    return [k](const dataecho::Example& e) { return e.id() % k == 0; };
  });

  auto pipeline = dataecho::range(12)
                      .filter("multiple_of", {{"k", 3}})
                      .map("scale", {{"by", 100}})
                      .batch({.size = 2})
                      .build();
  int64_t sum = 0;
  while (auto b = pipeline->next()) {
    const dataecho::Tensor& t = b->get("value");
    std::cout << "batch:";
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      std::cout << " " << t.data<int64_t>()[i];
      sum += t.data<int64_t>()[i];
    }
    std::cout << "\n";
  }
  // The same function with an argument it does not take: refused before anything runs.
  std::string refused;
  try {
    dataecho::range(3).map("scale", {{"times", 2}}).build();
  } catch (const dataecho::Error& e) {
    refused = e.what();
  }
  std::cout << "refused: " << refused << "\n";
  const bool ok = sum == (0 + 3 + 6 + 9) * 100 && refused.find("times") != std::string::npos;
  std::cout << (ok ? "custom_map: ok" : "custom_map: WRONG") << "\n";
  return ok ? 0 : 1;
}
