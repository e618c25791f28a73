// libFuzzer target: the texts an s3:// read parses, on arbitrary bytes: S3's XML answers
// (the error body, a listing page, element texts, character references) when the first
// byte is even, an AWS ini file (~/.aws/credentials, ~/.aws/config) when it is odd. The
// XML reader never throws; the ini parser throws only dataecho::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "dataecho/core/error.h"
#include "io/s3_config.h"
#include "io/s3_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dataecho;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    const s3::ErrorBody e = s3::parse_error_body(text);
    if (e.code.size() > text.size() * 4) std::abort();  // a reference decodes to <= 4 bytes
    size_t end = 0;
    for (int i = 0; i < 64 && end != std::string::npos; ++i) s3::xml_text(text, "Key", end, &end);
    if (text.find('&') == std::string::npos && s3::xml_decode(text) != text) std::abort();
    for (const s3::ListedObject& o : s3::parse_list_page(text).objects)
      if (o.size < -1) std::abort();
    return 0;
  }
  try {
    const s3::IniFile ini = s3::parse_ini(text, "fuzz");
    for (const auto& [name, section] : ini)
      for (const auto& [key, value] : section)
        if (key.empty()) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
