// libFuzzer target: the tf.Example parser (every feature, and a selection), then a
// serialize/parse round trip of whatever parsed.
#include <cstddef>
#include <cstdint>

#include "dataecho/core/error.h"
#include "dataecho/formats/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dataecho;
  try {
    Example e;
    parse_tf_example(data, size, {}, e);
    std::string again = serialize_tf_example(e);
    Example f;
    parse_tf_example(again.data(), again.size(), {}, f);
    if (f.fields().size() != e.fields().size()) __builtin_trap();
  } catch (const Error&) {
  }
  try {
    Example e;
    parse_tf_example(data, size, {{"image", "image/encoded"}, {"label", "image/class/label"}}, e);
  } catch (const Error&) {
  }
  return 0;
}
