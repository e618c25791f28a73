// Tokenizers (see dataecho/formats/tokenize.h for the contract).
#include "dataecho/formats/tokenize.h"

#include <dlfcn.h>

#include <mutex>
#include <unordered_map>

#include "dataecho/core/module_dir.h"
#include "dataecho/io/byte_stream.h"
#include "sentencepiece/spm_plugin.h"

namespace dataecho {
namespace {

[[noreturn]] void fail(const std::string& message, const std::string& file = "") {
  throw_error(ErrorCode::kInvalidArgument, "tokenize", message, file);
}

class ByteTokenizer : public Tokenizer {
 public:
  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    const size_t at = ids.size();
    ids.resize(at + text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[at + i] = static_cast<unsigned char>(text[i]);
  }
  int32_t eos_id() const override { return 256; }
};

struct Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// The length of the UTF-8 character at the start of `s` (1 for a byte that starts none).
size_t char_length(std::string_view s) {
  const auto c = static_cast<unsigned char>(s[0]);
  const size_t len = c < 0x80             ? 1
                     : (c & 0xe0) == 0xc0 ? 2
                     : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4
                                          : 1;
  if (len > s.size()) return 1;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xc0) != 0x80) return 1;
  return len;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

class VocabTokenizer : public Tokenizer {
 public:
  VocabTokenizer(const TokenizeOptions& o, bool words) : words_(words) {
    load(o.vocab);
    auto unk = ids_.find(o.unk);
    if (unk == ids_.end())
      fail("the unknown token \"" + o.unk + "\" is not in the vocabulary", o.vocab);
    unk_ = unk->second;
    auto eos = ids_.find(std::string_view("</s>"));
    eos_ = eos == ids_.end() ? -1 : eos->second;
  }
  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    size_t i = 0;
    while (i < text.size()) {
      size_t len = 0;
      if (words_) {
        if (is_space(text[i])) {
          ++i;
          continue;
        }
        while (i + len < text.size() && !is_space(text[i + len])) ++len;
      } else {
        len = char_length(text.substr(i));
      }
      auto it = ids_.find(text.substr(i, len));
      ids.push_back(it == ids_.end() ? unk_ : it->second);
      i += len;
    }
  }
  int32_t eos_id() const override { return eos_; }

 private:
  void load(const std::string& path) {
    if (path.empty()) fail("a chars or words tokenizer needs a \"vocab\" file");
    std::string text;
    auto in = open_stream(path);
    std::vector<char> chunk(1 << 16);
    while (size_t got = in->read(chunk.data(), chunk.size())) text.append(chunk.data(), got);
    std::unordered_map<std::string, int64_t> line_of;
    int32_t id = 0;
    for (size_t start = 0; start < text.size(); ++id) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string token = text.substr(start, end - start);
      if (!token.empty() && token.back() == '\r') token.pop_back();
      start = end + 1;
      if (token.empty()) continue;
      auto [it, fresh] = ids_.emplace(token, id);
      if (!fresh)
        fail("line " + std::to_string(id + 1) + ": token \"" + token + "\" is also on line " +
                 std::to_string(it->second + 1),
             path);
    }
    if (ids_.empty()) fail("the vocabulary is empty", path);
  }

  bool words_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  int32_t unk_ = 0;
  int32_t eos_ = -1;
};

// The plugin's functions, loaded once.
struct SpmPlugin {
  decltype(&dataecho_spm_load) load = nullptr;
  decltype(&dataecho_spm_free) free = nullptr;
  decltype(&dataecho_spm_eos_id) eos_id = nullptr;
  decltype(&dataecho_spm_encode) encode = nullptr;
};

const SpmPlugin& spm_plugin() {
  static std::once_flag once;
  static SpmPlugin plugin;
  static std::string error;
  std::call_once(once, [] {
#ifdef DATAECHO_NO_DEEPBIND
    error = "SentencePiece is not available in sanitizer builds (they cannot load its plugin)";
#else
    for (const std::string& p :
         plugin_paths("DATAECHO_SENTENCEPIECE_PLUGIN", "libdataecho_sentencepiece.so",
                      {DATAECHO_SPM_PLUGIN_INSTALLED, DATAECHO_SPM_PLUGIN_BUILT})) {
      void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (lib == nullptr) {
        error += std::string(error.empty() ? "" : "; ") + dlerror();
        continue;
      }
      plugin.load = reinterpret_cast<decltype(plugin.load)>(dlsym(lib, "dataecho_spm_load"));
      plugin.free = reinterpret_cast<decltype(plugin.free)>(dlsym(lib, "dataecho_spm_free"));
      plugin.eos_id = reinterpret_cast<decltype(plugin.eos_id)>(dlsym(lib, "dataecho_spm_eos_id"));
      plugin.encode = reinterpret_cast<decltype(plugin.encode)>(dlsym(lib, "dataecho_spm_encode"));
      if (plugin.load && plugin.free && plugin.eos_id && plugin.encode) return;
      error += "; " + p + " lacks the plugin's functions";
    }
#endif
  });
  if (plugin.load == nullptr) fail("cannot load the SentencePiece plugin: " + error);
  return plugin;
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : plugin_(spm_plugin()) {
    if (path.empty()) fail("a sentencepiece tokenizer needs a \"model\" file");
    char err[512] = {};
    handle_ = plugin_.load(path.c_str(), err, sizeof(err));
    if (handle_ == nullptr) fail(std::string("cannot load the SentencePiece model: ") + err, path);
    path_ = path;
  }
  ~SentencePieceTokenizer() override { plugin_.free(handle_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    char err[512] = {};
    auto sink = [](void* out, const int32_t* p, size_t n) {
      auto* v = static_cast<std::vector<int32_t>*>(out);
      v->insert(v->end(), p, p + n);
    };
    if (plugin_.encode(handle_, text.data(), text.size(), sink, &ids, err, sizeof(err)) != 0)
      throw_error(ErrorCode::kInvalidArgument, "tokenize",
                  std::string("SentencePiece cannot encode the text: ") + err, path_);
  }
  int32_t eos_id() const override { return plugin_.eos_id(handle_); }

 private:
  const SpmPlugin& plugin_;
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace

std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizeOptions& o) {
  switch (o.kind) {
    case TokenizeOptions::Kind::kBytes:
      return std::make_shared<ByteTokenizer>();
    case TokenizeOptions::Kind::kChars:
      return std::make_shared<VocabTokenizer>(o, false);
    case TokenizeOptions::Kind::kWords:
      return std::make_shared<VocabTokenizer>(o, true);
    case TokenizeOptions::Kind::kSentencePiece:
      return std::make_shared<SentencePieceTokenizer>(o.model);
  }
  fail("unknown tokenizer kind");
}

MapFn make_tokenize_fn(const TokenizeOptions& o) {
  auto tokenizer = make_tokenizer(o);
  const int32_t eos = o.eos_id.value_or(tokenizer->eos_id());
  if (o.add_eos && eos < 0)
    fail("this tokenizer has no end-of-sequence id: give eos_id, or add_eos false",
         o.vocab.empty() ? o.model : o.vocab);
  return [tokenizer, o, eos](Example e, const MapContext&) {
    const Tensor& t = e.get(o.field);
    if (t.dtype() != DType::kUInt8 || t.rank() > 1)
      throw_error(ErrorCode::kInvalidArgument, "tokenize",
                  "field '" + o.field + "' is " + dtype_name(t.dtype()) + " " +
                      shape_to_string(t.shape()) + ", not text (uint8 bytes)",
                  e.describe());
    thread_local std::vector<int32_t> ids;
    ids.clear();
    tokenizer->encode(t.bytes(), ids);
    if (o.add_eos) ids.push_back(eos);
    Tensor out = Tensor::from_vector(ids);
    if (!o.keep_input) e.erase(o.field);
    e.set(o.output, std::move(out));
    return e;
  };
}

}  // namespace dataecho
