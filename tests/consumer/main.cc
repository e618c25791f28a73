// Builds a pipeline from a spec against the installed library and checks its output.
#include <dataecho/spec/build.h>

#include <iostream>

int main() {
  auto p = dataecho::build_pipeline(dataecho::parse_spec_text(
      R"({"source": {"kind": "range", "count": 10}, "stages": [{"op": "batch", "size": 5}]})",
      "consumer"));
  int64_t sum = 0, batches = 0;
  while (auto b = p->next()) {
    const auto& t = b->get("value");
    for (int64_t i = 0; i < t.num_elements(); ++i) sum += t.data<int64_t>()[i];
    ++batches;
  }
  std::cout << "batches=" << batches << " sum=" << sum << "\n";
  return (batches == 2 && sum == 45) ? 0 : 1;
}
