// The C++ fluent builder's options (PipelineDef::map, ::shuffle, ...): a struct per op, a
// field per declared option with its default, unset fields keep the op's defaults.
// Written by scripts/gen_spec.py from the operators' declarations: do not edit.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dataecho {

// map: Applies a registered function ("fn", with its "args") to every element.
struct MapStageOptions {
  // threads ("auto": set by the tuner within the CPU budget); default 1
  int64_t parallelism = 1;
  // input order (true) or as finished (false); default the pipeline's "deterministic"
  std::optional<bool> deterministic = std::nullopt;
  // elements finished ahead of the consumer (0: max(16, parallelism), growing for a cheap function
  // of small elements to at most 1,024 elements and 1 MiB); default 0
  std::optional<int64_t> buffer = std::nullopt;
};

// shuffle: Shuffles through a buffer; after an example echo it keeps an element's copies out of one
// batch.
struct ShuffleStageOptions {
  // required; elements held
  int64_t buffer = 0;
  // the seed of the shuffle (the same in every epoch when given); default derived from the
  // pipeline's seed
  std::optional<uint64_t> seed = std::nullopt;
  // a new order each pass over the input; default true
  std::optional<bool> reshuffle_each_iteration = std::nullopt;
};

// batch: Stacks size elements into one: every tensor gets a leading batch dimension.
struct BatchStageOptions {
  // required; elements per batch
  int64_t size = 0;
  // drop a last, smaller batch; default false
  bool drop_remainder = false;
};

// padded_batch: Batches elements of different lengths, padding each variable-length field
// (docs/text.md).
struct PaddedBatchStageOptions {
  // required; elements per batch
  int64_t size = 0;
  // drop a last, smaller batch; default false
  bool drop_remainder = false;
  // the fields to pad and how; a list of field names, or an object {field: {"length" | "multiple":
  // n, "value": v, "truncate": bool}}; default every field of rank >= 1, to the batch's longest,
  // with 0
  nlohmann::json fields = nullptr;
  // add <field>_length per padded field; default true
  bool lengths = true;
};

// pack: Concatenates token sequences into blocks of length tokens, with the ids of the sequences in
// each block and a per-token document field (docs/text.md).
struct PackStageOptions {
  // required; tokens per block
  int64_t length = 0;
  // appended after each sequence that does not end with it; default none
  std::optional<int64_t> eos_id = std::nullopt;
  // fills the last block; default 0
  std::optional<int64_t> pad_id = std::nullopt;
  // drop a last, partial block; default false
  bool drop_remainder = false;
  // Also each block's sequences' epochs and echo indices, as fields "epochs" and "echoes"
  // (or the names epochs_field and echoes_field give): the trainer counts fresh sequences.
  bool reads = false;
  // the tokens (int32 [n]); default "tokens"
  std::optional<std::string> field = std::nullopt;
  // per token, the index of its sequence in the block; default "document"
  std::optional<std::string> document_field = std::nullopt;
  // the ids of the block's sequences; default "ids"
  std::optional<std::string> ids_field = std::nullopt;
  // each sequence's epoch ("": not written); default ""
  std::optional<std::string> epochs_field = std::nullopt;
  // each sequence's echo index ("": not written); default ""
  std::optional<std::string> echoes_field = std::nullopt;
};

// bucket: Batches sequences of similar length together (tf.data's bucket_by_sequence_length),
// padded as padded_batch pads.
struct BucketStageOptions {
  // increasing lengths that split the buckets; default none: one bucket
  std::vector<int64_t> boundaries = {};
  // one per bucket (boundaries + 1); or token_budget; default none
  std::vector<int64_t> batch_sizes = {};
  // instead of batch_sizes: a batch's padded tokens; default none
  std::optional<int64_t> token_budget = std::nullopt;
  // the field whose length picks the bucket; default "tokens"
  std::optional<std::string> field = std::nullopt;
  // drop each bucket's last, smaller batch; default false
  bool drop_remainder = false;
  // the fields to pad and how; a list of field names, or an object {field: {"length" | "multiple":
  // n, "value": v, "truncate": bool}}; default every field of rank >= 1, to the batch's longest,
  // with 0
  nlohmann::json fields = nullptr;
  // add <field>_length per padded field; default true
  bool lengths = true;
};

// echo: Data echoing: repeats every element factor times in all, or adaptively while the next fresh
// element is late (docs/echo.md).
struct EchoStageOptions {
  // >= 1; fractional: floor(e) copies, one more with p = frac
  double factor = 2;
  // adaptive echoing: repeats only while the input is late
  bool adaptive = false;
  // adaptive, its cap set by the tuner ("factor": "auto")
  bool autotune = false;
  // adaptive and auto: at most this many copies; default 4.0
  std::optional<double> max_factor = std::nullopt;
  // adaptive and auto: elements in the fresh queue and the repeat pool; default 1024
  std::optional<int64_t> buffer = std::nullopt;
  // adaptive and auto: bytes of each (0: no byte bound); default 16777216
  std::optional<int64_t> buffer_bytes = std::nullopt;
  // the seed of the fractional and adaptive draws (the same in every epoch when given); default
  // derived from the pipeline's seed
  std::optional<uint64_t> seed = std::nullopt;
};

// interleave: Reads cycle shards (files) at once, one element from each in turn; right after a
// source over several files.
struct InterleaveStageOptions {
  // shards open at once; default 4
  int64_t cycle = 4;
  // reader threads (-1: one per open shard; 0: none, read on the consumer's thread; "auto": one per
  // shard, with buffer_per_shard tuned); default -1
  std::optional<int64_t> parallelism = std::nullopt;
  // elements read ahead per open shard; default 2
  std::optional<int64_t> buffer_per_shard = std::nullopt;
};

// cache: Caches the first pass, in memory or on local disk; later passes read the cache
// (docs/echo.md, "Cache or echo").
struct CacheStageOptions {
  // a folder on local disk (relative to the spec's); default in memory
  std::string path = "";
  // disk: names what the cache holds; default a fingerprint of everything upstream and of the
  // source's files
  std::optional<std::string> key = std::nullopt;
  // memory: bytes of tensors held (0: a quarter of physical memory); default 0
  std::optional<int64_t> max_bytes = std::nullopt;
  // memory: keep the prefix that fits ("on_full": "prefix")
  bool prefix = false;
  // allow a shuffle upstream (its first order is replayed); default false
  bool allow_shuffled = false;
};

// Each struct's options as PipelineDef::declared_stage takes them (null: not given).
nlohmann::json declared_options(const MapStageOptions& o);
nlohmann::json declared_options(const ShuffleStageOptions& o);
nlohmann::json declared_options(const BatchStageOptions& o);
nlohmann::json declared_options(const PaddedBatchStageOptions& o);
nlohmann::json declared_options(const PackStageOptions& o);
nlohmann::json declared_options(const BucketStageOptions& o);
nlohmann::json declared_options(const EchoStageOptions& o);
nlohmann::json declared_options(const InterleaveStageOptions& o);
nlohmann::json declared_options(const CacheStageOptions& o);
// A parallelism or buffer as a spec writes it: the count, or "auto" for kAutotune.
nlohmann::json tunable(int64_t n);

}  // namespace dataecho
