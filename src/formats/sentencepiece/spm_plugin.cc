// libdataecho_sentencepiece.so: Debian's libsentencepiece behind the C interface of
// spm_plugin.h (why a plugin: see there).
#include "spm_plugin.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

void set_error(const std::string& message, char* error, size_t error_size) {
  if (error_size == 0) return;
  const size_t n = std::min(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

}  // namespace

extern "C" {

void* dataecho_spm_load(const char* path, char* error, size_t error_size) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto status = sp->Load(path);
  if (!status.ok()) {
    set_error(status.ToString(), error, error_size);
    delete sp;
    return nullptr;
  }
  return sp;
}

void dataecho_spm_free(void* model) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(model);
}

int32_t dataecho_spm_eos_id(void* model) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(model)->eos_id();
}

int dataecho_spm_encode(void* model, const char* text, size_t size,
                        void (*sink)(void* out, const int32_t* ids, size_t count), void* out,
                        char* error, size_t error_size) {
  std::vector<int> ids;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(model)->Encode(
      std::string_view(text, size), &ids);
  if (!status.ok()) {
    set_error(status.ToString(), error, error_size);
    return -1;
  }
  static_assert(sizeof(int) == sizeof(int32_t));
  sink(out, reinterpret_cast<const int32_t*>(ids.data()), ids.size());
  return 0;
}
}
