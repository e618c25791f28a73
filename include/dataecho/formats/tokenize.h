// Tokenizers and the `tokenize` map function: text (uint8 bytes, as the `text` source
// gives it) to int32 token ids (docs/text.md). No vocabulary or model is ever
// downloaded: each comes from a file given by path.
//
//   bytes:          each UTF-8 byte is its own id (0..255); no vocabulary; eos 256.
//   chars, words:   a vocabulary file, one token per line (its line number, from 0, is
//                   its id; a "\r" before the newline is dropped); chars are UTF-8 code
//                   points (a byte of invalid UTF-8 is one char), words are split on
//                   ASCII whitespace; a token not in the vocabulary is `unk`'s id, an
//                   error when `unk` is not in it.
//   sentencepiece:  a SentencePiece .model (unigram or BPE), through Debian's
//                   libsentencepiece. That library carries its own copy of Protobuf
//                   3.14, which cannot share a process with the Protobuf that dataecho
//                   links, so it lives in a plugin (libdataecho_sentencepiece.so, built
//                   beside the engine) loaded with RTLD_DEEPBIND. The plugin is found by
//                   $DATAECHO_SENTENCEPIECE_PLUGIN, then beside the engine's code
//                   (module_dir(): a wheel's dataecho/ folder), then the install and
//                   build folders.
//                   Not available in the sanitizer builds (RTLD_DEEPBIND is not
//                   supported there).
// The end-of-sequence id (`eos_id`, or the default above; for chars and words the line
// "</s>" of the vocabulary; for sentencepiece the model's) is appended when `add_eos`;
// a tokenizer without one and add_eos is an error when it is made.
// Memory: the vocabulary or model, shared by every copy of the function; per call, the
// output tensor. Thread-safety: a Tokenizer is immutable; encode() may run on any
// number of threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataecho/ops/map.h"

namespace dataecho {

struct TokenizeOptions {
  enum class Kind { kBytes, kChars, kWords, kSentencePiece } kind = Kind::kBytes;
  std::string vocab = "";  // chars, words
  std::string model = "";  // sentencepiece
  std::string unk = "<unk>";
  std::optional<int32_t> eos_id = std::nullopt;
  bool add_eos = true;
  std::string field = "text";     // the input field (uint8 bytes)
  std::string output = "tokens";  // the int32 [n] output field
  bool keep_input = false;        // otherwise the input field is dropped
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Appends the ids of `text` to `ids` (without the end-of-sequence id).
  virtual void encode(std::string_view text, std::vector<int32_t>& ids) const = 0;
  // The end-of-sequence id, or -1 when the tokenizer has none.
  virtual int32_t eos_id() const = 0;
};

// Throws dataecho::Error (stage "tokenize") naming the file and what is wrong: a missing
// or unreadable file, a duplicate vocabulary line, `unk` or `</s>` not found when needed.
std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizeOptions& options);

// The map function: `field` -> `output`, with eos appended when add_eos.
MapFn make_tokenize_fn(const TokenizeOptions& options);

}  // namespace dataecho
