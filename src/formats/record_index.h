// Record indexes of files (Dataset::record_index): how many records a file holds and the
// byte offset where each starts, so that a record range can open the file at its first
// record. A tfrecord file's index is read from its sidecar when it has one, else found by
// a walk over its record headers; a tar file's are its sample starts (a read of the
// archive); a text file's its record starts (text_source.cc). A compressed file has none.
// Each index is made once per process for a local file of the same size, modification
// time and inode (http(s) files are indexed again each time).
#pragma once

#include <functional>
#include <string>

#include "dataecho/core/dataset.h"
#include "dataecho/io/byte_stream.h"

namespace dataecho {

// The sidecar of tfrecord file `uri` is `uri` + ".idx", as DALI's tfrecord2idx writes it:
// one line per record, "offset size" (decimal; size counts the record's 16 bytes of
// framing), records in order and end to end. It is used when it covers exactly the
// file's bytes, and refused (kDataLoss, naming it and the line) when it does not.
inline constexpr const char* kTfRecordSidecarSuffix = ".idx";

// The index of tfrecord file `uri`: its sidecar's, or a walk that reads each record's
// 12-byte header and seeks past its data (reads on through data under 64 KiB, and over
// http(s)). A corrupt length or a truncated record is an error (kDataLoss) naming `label`,
// the file, the record and its byte offset.
ShardIndex tfrecord_record_index(const std::string& label, const std::string& uri,
                                 const StreamOptions& options);

// The index of tar shard `uri`: each sample's first header. A compressed shard is refused
// (kInvalidArgument, compressed_reason); a corrupt archive is an error naming the record.
ShardIndex tar_record_index(const std::string& label, const std::string& uri,
                            const StreamOptions& options);

// `make()`, or the index this process made earlier under the same `key` (the format and
// whatever of its options changes the index) for the same local file `uri`, unchanged.
ShardIndex cached_record_index(const std::string& uri, const std::string& key,
                               const std::function<ShardIndex()>& make);

// Why a compressed file's records cannot be located (`kind`: "tar shard", `filter`: "gzip").
std::string compressed_reason(const std::string& kind, const std::string& uri,
                              const std::string& filter);

}  // namespace dataecho
