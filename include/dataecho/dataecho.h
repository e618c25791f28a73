// The whole public API of the engine in one header: the fluent pipeline builder and the
// JSON spec, the pipeline, its elements, errors, and the extension points (docs/api.md).
//
//   #include <dataecho/dataecho.h>
//   auto p = dataecho::tfrecord({"train-00000-of-00008.tfrecord"},
//                               {{"features", {{"image", {{"key", "image/encoded"}}},
//                                              {"label", "image/class/label"}}}})
//                .map("decode_image")
//                .echo({.factor = 2})
//                .shuffle({.buffer = 1000})
//                .map("augment", {{"flip", true}, {"normalize", true}})
//                .batch({.size = 128})
//                .build();
//   while (auto batch = p->next()) { ... }
//
// The trainer (LibTorch) is a library of its own, with its headers under dataecho/train/.
#pragma once

#include "dataecho/core/error.h"         // Error, ErrorCode
#include "dataecho/core/example.h"       // Example, RowMeta
#include "dataecho/core/pipeline.h"      // Pipeline: next(), save(), restore(), stats()
#include "dataecho/core/tensor.h"        // Tensor, DType
#include "dataecho/formats/files.h"      // class_to_idx(), image_folder_classes()
#include "dataecho/ops/basic.h"          // Predicate
#include "dataecho/ops/map.h"            // MapFn, MapContext
#include "dataecho/spec/build.h"         // build_pipeline(json), load_spec_file
#include "dataecho/spec/pipeline_def.h"  // PipelineDef, range(), tfrecord(), idx(), files(), ...
#include "dataecho/spec/registry.h"      // register_map_function(), register_filter(), ...
#include "dataecho/spec/spec_reader.h"   // SpecObject: a registered function's arguments
