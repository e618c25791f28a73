// The C interface of libdataecho_sentencepiece.so, the plugin through which the
// `tokenize` map function (formats/tokenize.cc) uses Debian's libsentencepiece. The
// library bundles Protobuf 3.14, whose symbols clash with the Protobuf 3.21 that
// dataecho links, so it is never linked into a dataecho program: tokenize.cc loads this
// plugin with dlopen(RTLD_LOCAL | RTLD_DEEPBIND), where it binds to its own copy.
// Thread-safety: encode may run on several threads at once on one handle.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// A loaded model, or null with the reason in `error` (at most `error_size` bytes).
void* dataecho_spm_load(const char* path, char* error, size_t error_size);
void dataecho_spm_free(void* model);
// The model's end-of-sequence id; -1 when it has none.
int32_t dataecho_spm_eos_id(void* model);
// Encodes `size` bytes of text and hands the ids to `sink` (once); 0, or -1 with the
// reason in `error`.
int dataecho_spm_encode(void* model, const char* text, size_t size,
                        void (*sink)(void* out, const int32_t* ids, size_t count), void* out,
                        char* error, size_t error_size);
}
