// Variable-length elements for the tests of padded_batch, unbatch, pack and bucket.
#pragma once

#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "dataecho/core/example_json.h"
#include "dataecho/spec/pipeline_def.h"
#include "test_util.h"

namespace dataecho::testing {

// Element i: "tokens" int32 [lengths[i]] holding i * 100 + j, "label" int64 scalar i.
inline std::vector<Example> sequences(const std::vector<int64_t>& lengths) {
  std::vector<Example> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::vector<int32_t> t(static_cast<size_t>(lengths[i]));
    for (size_t j = 0; j < t.size(); ++j) t[j] = static_cast<int32_t>(i * 100 + j);
    Example e;
    e.set("tokens", Tensor::from_vector(t));
    e.set("label", Tensor::scalar<int64_t>(static_cast<int64_t>(i)));
    out.push_back(std::move(e));
  }
  return out;
}

// The int32 values of a tensor, or of row `row` of a batch's tensor.
inline std::vector<int32_t> values_of(const Tensor& t, int64_t row = -1) {
  const int64_t w = row < 0 ? t.num_elements() : t.shape()[1];
  const int32_t* p = t.data<int32_t>() + (row < 0 ? 0 : row * w);
  return {p, p + w};
}

// For each k of `points`: a pipeline of `make` saved after k elements and restored into
// a fresh one gives the rest of an uninterrupted run. Returns the uninterrupted run.
inline std::vector<Example> expect_restores_identically(const std::function<PipelineDef()>& make,
                                                        const std::vector<int>& points) {
  auto full = drain(*make().build());
  for (int k : points) {
    auto p = make().build();
    drain(*p, k);
    const std::string state = p->save();
    auto q = make().build();
    q->restore(state);
    auto rest = drain(*q);
    EXPECT_EQ(rest.size(), full.size() - static_cast<size_t>(k)) << "saved after " << k;
    for (size_t i = 0; i < rest.size() && k + i < full.size(); ++i)
      EXPECT_EQ(example_to_json(rest[i], true), example_to_json(full[k + i], true))
          << "saved after " << k;
  }
  return full;
}

}  // namespace dataecho::testing
