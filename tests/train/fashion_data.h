// Fashion-MNIST for the trainer's tests, read from Debian's dataset-fashion-mnist files
// into memory: each example has "image" uint8 [28,28,1] (HWC) and "label" int64, and its
// index as id, as the idx source yields them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataecho/core/example.h"

namespace dataecho::testing {

inline const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

bool fashion_available();
// The first `limit` examples of the training set (train = true) or the test set.
// Cached per (train, limit) for the life of the test program.
std::shared_ptr<const std::vector<Example>> fashion(bool train, int64_t limit);

}  // namespace dataecho::testing
