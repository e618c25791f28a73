// The image map functions a spec can name: decode_image, augment, decode_augment,
// resize and normalize. Arguments are documented in docs/image.md.
#include <cmath>

#include "dataecho/formats/files.h"
#include "dataecho/image/codec.h"
#include "dataecho/image/transforms.h"
#include "dataecho/spec/registry.h"

namespace dataecho {
namespace {

// An int, or [height, width].
std::pair<int, int> size_pair(const nlohmann::json& j, const std::string& path) {
  auto positive = [&](const nlohmann::json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1 << 20)
      throw_spec_error(path,
                       "expected a size (an integer >= 1, or [height, width]), got " + v.dump());
    return static_cast<int>(v.get<int64_t>());
  };
  if (j.is_array()) {
    if (j.size() != 2) throw_spec_error(path, "expected [height, width], got " + j.dump());
    return {positive(j[0]), positive(j[1])};
  }
  int s = positive(j);
  return {s, s};
}

// [lo, hi] with lo <= hi, both in (min, max].
std::pair<double, double> range_pair(const nlohmann::json& j, const std::string& path, double min,
                                     double max) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number() || !j[1].is_number())
    throw_spec_error(path, "expected [min, max], got " + j.dump());
  double lo = j[0].get<double>(), hi = j[1].get<double>();
  if (!(lo > min && lo <= hi && hi <= max))
    throw_spec_error(path, "expected " + std::to_string(min) +
                               " < min <= max <= " + std::to_string(max) + ", got " + j.dump());
  return {lo, hi};
}

std::vector<float> floats(const nlohmann::json* j, const std::string& path, bool positive) {
  std::vector<float> out;
  if (!j) return out;
  auto one = [&](const nlohmann::json& v) {
    if (!v.is_number() || (positive && !(v.get<double>() > 0)))
      throw_spec_error(path, std::string("expected ") + (positive ? "positive " : "") +
                                 "numbers, got " + j->dump());
    out.push_back(v.get<float>());
  };
  if (j->is_array()) {
    if (j->empty()) throw_spec_error(path, "expected at least one number");
    for (const auto& v : *j) one(v);
  } else {
    one(*j);
  }
  return out;
}

NormalizeOptions normalize_args(SpecObject& a) {
  NormalizeOptions n;
  n.mean = floats(a.raw("mean"), a.field_path("mean"), false);
  n.std = floats(a.raw("std"), a.field_path("std"), true);
  if (!n.mean.empty() && !n.std.empty() && n.mean.size() != n.std.size() && n.mean.size() != 1 &&
      n.std.size() != 1)
    throw_spec_error(a.field_path("std"), "has " + std::to_string(n.std.size()) +
                                              " values but mean has " +
                                              std::to_string(n.mean.size()));
  return n;
}

DecodeOptions decode_args(SpecObject& a) {
  DecodeOptions d;
  d.channels = static_cast<int>(a.get_int("channels"));
  if (d.channels == 2) throw_spec_error(a.field_path("channels"), "expected 0, 1 or 3, got 2");
  d.strict = a.get_bool("strict");
  d.fast_huffman = a.get_bool("fast_huffman");
  return d;
}

AugmentOptions augment_args(SpecObject& a) {
  AugmentOptions o;
  o.pad_crop = static_cast<int>(a.get_int("pad_crop"));
  if (const nlohmann::json* f = a.raw("flip")) {
    if (f->is_boolean()) {
      o.flip_probability = f->get<bool>() ? 0.5 : 0.0;
    } else if (f->is_number() && f->get<double>() >= 0 && f->get<double>() <= 1) {
      o.flip_probability = f->get<double>();
    } else {
      throw_spec_error(a.field_path("flip"),
                       "expected true, false or a probability in [0, 1], got " + f->dump());
    }
  }
  if (const nlohmann::json* r = a.raw("random_resized_crop")) {
    const std::string path = a.field_path("random_resized_crop");
    RandomResizedCropOptions rrc;
    if (r->is_object()) {
      SpecObject sub(*r, path);
      const nlohmann::json* size = sub.raw("size");
      if (!size) throw_spec_error(sub.field_path("size"), "missing; expected the output size");
      std::tie(rrc.height, rrc.width) = size_pair(*size, sub.field_path("size"));
      if (const nlohmann::json* s = sub.raw("scale"))
        std::tie(rrc.scale_min, rrc.scale_max) = range_pair(*s, sub.field_path("scale"), 0, 1);
      if (const nlohmann::json* s = sub.raw("ratio"))
        std::tie(rrc.ratio_min, rrc.ratio_max) = range_pair(*s, sub.field_path("ratio"), 0, 1e6);
      sub.finish();
    } else {
      std::tie(rrc.height, rrc.width) = size_pair(*r, path);
    }
    o.random_resized_crop = rrc;
  }
  if (const nlohmann::json* r = a.raw("resize")) {
    if (o.random_resized_crop)
      throw_spec_error(a.field_path("resize"), "random_resized_crop and resize are exclusive");
    if (r->is_array()) {
      std::tie(o.resize_height, o.resize_width) = size_pair(*r, a.field_path("resize"));
    } else {
      o.resize_shorter = size_pair(*r, a.field_path("resize")).first;
    }
  }
  if (const nlohmann::json* c = a.raw("center_crop"))
    std::tie(o.center_crop_height, o.center_crop_width) =
        size_pair(*c, a.field_path("center_crop"));
  if (const nlohmann::json* n = a.raw("normalize")) {
    if (n->is_boolean()) {
      if (n->get<bool>()) o.normalize = NormalizeOptions{};
    } else if (n->is_object()) {
      SpecObject sub(*n, a.field_path("normalize"));
      o.normalize = normalize_args(sub);
      sub.finish();
    } else {
      throw_spec_error(
          a.field_path("normalize"),
          "expected true, false or {\"mean\": [...], \"std\": [...]}, got " + n->dump());
    }
  }
  o.antialias = a.get_bool("antialias");
  validate(o);
  return o;
}

struct Fields {
  std::string in, out;
};
Fields field_args(SpecObject& a) {
  Fields f;
  f.in = a.get_string("field");
  f.out = a.get_string("output", f.in);
  return f;
}

// A tar source without "fields" names each file of a sample by its extension: the
// element's image file's extension, or "".
std::string image_extension_field(const Example& e) {
  for (const std::string& dotted : image_extensions())  // the files source's (".jpg", ...)
    if (e.find(dotted.substr(1)) != nullptr) return dotted.substr(1);
  return "";
}

// The field the function reads. Missing while the element has the tf.Example key that
// the tfrecord source names so by default, or a tar sample's image file named by its
// extension, the error says how to name it.
const Tensor& input_field(const Example& e, const std::string& name) {
  if (const Tensor* t = e.find(name)) return *t;
  if (const std::string ext = image_extension_field(e); !ext.empty() && name == "image") {
    try {
      return e.get(name);
    } catch (const Error& err) {
      const std::string label = e.find("cls") ? ", \"label\": \"cls\"" : "";
      throw Error(err.code(), err.stage(),
                  err.message() + "; a tar source names each file by its extension: read the " +
                      "shards with \"fields\": {\"image\": \"" + ext + "\"" + label +
                      "} (Python: de.tar(..., fields={\"image\": \"" + ext + "\"" + label +
                      "})) or give this function \"field\": \"" + ext + "\"",
                  err.input());
    }
  }
  const std::string key = name == "label" ? "image/class/label" : "image/encoded";
  if (e.find(key) == nullptr) return e.get(name);  // the plain error, listing the fields
  try {
    return e.get(name);
  } catch (const Error& err) {  // Example::get's error, with how to name the field
    throw Error(err.code(), err.stage(),
                err.message() + "; a tfrecord source names \"" + key + "\" \"" +
                    (key == "image/encoded" ? "image" : "label") +
                    "\" only without a \"features\" mapping: map it there (\"" + name + "\": \"" +
                    key + "\") or give this function \"field\": \"" + key + "\"",
                err.input());
  }
}

// Runs `fn` on the field, naming the field in its errors.
template <class Fn>
Example apply(Example e, const Fields& f, Fn&& fn) {
  const Tensor& t = input_field(e, f.in);
  Tensor out;
  try {
    out = fn(t);
  } catch (const Error& err) {
    if (!err.input().empty()) throw;
    throw Error(err.code(), err.stage(), err.message(), "field '" + f.in + "'");
  }
  e.set(f.out, std::move(out));
  return e;
}

bool is_encoded(const Tensor& t) { return t.dtype() == DType::kUInt8 && t.rank() == 1; }

// A decoded image passes through: rank 3 unchanged, rank 2 viewed as one channel.
Tensor as_decoded(const Tensor& t) {
  if (t.dtype() == DType::kUInt8 && t.rank() == 3) return t;
  if (t.dtype() == DType::kUInt8 && t.rank() == 2)
    return t.reshaped({t.shape()[0], t.shape()[1], 1});
  throw_error(ErrorCode::kInvalidArgument, "decode_image",
              std::string("expected encoded bytes (uint8 [n]) or a decoded uint8 image, got ") +
                  dtype_name(t.dtype()) + " " + shape_to_string(t.shape()));
}

const char* const kSizeShape = "an integer in [1, 1048576], or [height, width]";

// An image function's options: the fields, then `groups` in order.
OpSchema image_schema(std::string name, std::string doc,
                      std::initializer_list<std::vector<OptionDecl>> groups) {
  OpSchema schema{std::move(name),
                  std::move(doc),
                  {{.name = "field",
                    .type = OptionType::kString,
                    .fallback = "image",
                    .doc = "the input field"},
                   {.name = "output",
                    .type = OptionType::kString,
                    .default_text = "the input field",
                    .doc = "the output field"}}};
  for (const auto& group : groups)
    schema.options.insert(schema.options.end(), group.begin(), group.end());
  return schema;
}

std::vector<OptionDecl> decode_options() {
  const DecodeOptions d;
  return {{.name = "channels",
           .fallback = d.channels,
           .min = 0,
           .max = 3,
           .doc = "0: as stored, 1: gray, 3: RGB"},
          {.name = "strict",
           .type = OptionType::kBool,
           .fallback = d.strict,
           .doc = "a corrupt image is an error (false: libjpeg's best effort)"},
          {.name = "fast_huffman",
           .type = OptionType::kBool,
           .fallback = d.fast_huffman,
           .doc = "dataecho's JPEG Huffman decoder (false: libjpeg's)"}};
}

std::vector<OptionDecl> augment_options() {
  return {{.name = "pad_crop",
           .fallback = 0,
           .min = 0,
           .max = 1 << 16,
           .doc = "pad by this many pixels, then crop back at a random place"},
          {.name = "flip",
           .type = OptionType::kJson,
           .default_text = "false",
           .shape = "true, false or a probability in [0, 1]",
           .doc = "a random horizontal flip (true: p = 0.5)"},
          {.name = "random_resized_crop",
           .type = OptionType::kJson,
           .default_text = "none",
           .shape = std::string(kSizeShape) +
                    ", or {\"size\", \"scale\": [min, max], \"ratio\": [min, max]}",
           .doc = "torchvision's RandomResizedCrop (scale [0.08, 1], ratio [3/4, 4/3])"},
          {.name = "resize",
           .type = OptionType::kJson,
           .default_text = "none",
           .shape = kSizeShape,
           .doc = "the shorter side to this (an integer), or to [height, width]"},
          {.name = "center_crop",
           .type = OptionType::kJson,
           .default_text = "none",
           .shape = kSizeShape,
           .doc = "the central region"},
          {.name = "normalize",
           .type = OptionType::kJson,
           .default_text = "false",
           .shape = "true, false or {\"mean\": [...], \"std\": [...]}",
           .doc = "to float32 (x / 255 - mean) / std (true: ImageNet's)"},
          {.name = "antialias",
           .type = OptionType::kBool,
           .fallback = true,
           .doc = "antialias when shrinking, as torchvision's default"}};
}

std::vector<OptionDecl> normalize_options() {
  return {{.name = "mean",
           .type = OptionType::kJson,
           .default_text = "ImageNet's",
           .shape = "a number or a list of numbers",
           .doc = "per channel"},
          {.name = "std",
           .type = OptionType::kJson,
           .default_text = "ImageNet's",
           .shape = "a positive number or a list of them",
           .doc = "per channel"}};
}

// decode_image, augment and decode_augment.
void register_decode_and_augment(Registry& r) {
  const MapFnTraits decodes{.augmentation = false, .decodes = true};
  const MapFnTraits augments{.augmentation = true, .decodes = false};
  const MapFnTraits both{.augmentation = true, .decodes = true};
  r.add_map_fn(
      image_schema("decode_image",
                   "Encoded bytes (JPEG, PNG, ...) to a uint8 [h, w, c] image; a decoded "
                   "image passes through (docs/image.md).",
                   {decode_options()}),
      [](SpecObject& a) -> MapFn {
        Fields f = field_args(a);
        DecodeOptions d = decode_args(a);
        return [f, d](Example e, const MapContext&) {
          return apply(std::move(e), f, [&](const Tensor& t) {
            return is_encoded(t) ? decode_image(t.bytes(), d) : as_decoded(t);
          });
        };
      },
      decodes);

  r.add_map_fn(
      image_schema("augment",
                   "Random crops, flips, resizing and normalization of a decoded image, "
                   "drawn anew per element and per echo copy (docs/image.md).",
                   {augment_options()}),
      [](SpecObject& a) -> MapFn {
        Fields f = field_args(a);
        AugmentOptions o = augment_args(a);
        return [f, o](Example e, const MapContext& ctx) {
          Rng rng = ctx.rng_for(e);
          return apply(std::move(e), f, [&](const Tensor& t) { return augment(t, o, rng); });
        };
      },
      augments);

  // decode + augment fused: JPEG crops decode only the region they keep.
  r.add_map_fn(
      image_schema("decode_augment",
                   "decode_image and augment in one: a JPEG crop decodes only the region it "
                   "keeps (docs/image.md).",
                   {decode_options(),
                    augment_options(),
                    {{.name = "decoder_scale",
                      .type = OptionType::kBool,
                      .fallback = false,
                      .doc = "let the JPEG decoder shrink by 1/2, 1/4 or 1/8 before a resize "
                             "(faster; not torchvision's pixels)"}}}),
      [](SpecObject& a) -> MapFn {
        Fields f = field_args(a);
        DecodeOptions d = decode_args(a);
        AugmentOptions o = augment_args(a);
        o.decoder_scale = a.get_bool("decoder_scale");
        return [f, d, o](Example e, const MapContext& ctx) {
          Rng rng = ctx.rng_for(e);
          return apply(std::move(e), f, [&](const Tensor& t) {
            return is_encoded(t) ? decode_augment(t.bytes(), d, o, rng)
                                 : augment(as_decoded(t), o, rng);
          });
        };
      },
      both);
}

// resize and normalize.
void register_resize_and_normalize(Registry& r) {
  r.add_map_fn(
      image_schema("resize", "Resizes a decoded image (docs/image.md).",
                   {{{.name = "size",
                      .type = OptionType::kJson,
                      .required = true,
                      .shape = kSizeShape,
                      .doc = "the shorter side (an integer), or [height, width]"},
                     {.name = "antialias",
                      .type = OptionType::kBool,
                      .fallback = true,
                      .doc = "antialias when shrinking"}}}),
      [](SpecObject& a) -> MapFn {
        Fields f = field_args(a);
        AugmentOptions o;
        const nlohmann::json* s = a.raw("size");
        if (!s)
          throw_spec_error(a.field_path("size"), "missing; expected a size or [height, width]");
        if (s->is_array()) {
          std::tie(o.resize_height, o.resize_width) = size_pair(*s, a.field_path("size"));
        } else {
          o.resize_shorter = size_pair(*s, a.field_path("size")).first;
        }
        o.antialias = a.get_bool("antialias");
        return [f, o](Example e, const MapContext& ctx) {
          Rng rng = ctx.rng_for(e);  // unused: resize draws nothing
          return apply(std::move(e), f, [&](const Tensor& t) { return augment(t, o, rng); });
        };
      });

  r.add_map_fn(
      image_schema("normalize", "An image to float32 (x / 255 - mean) / std (docs/image.md).",
                   {normalize_options()}),
      [](SpecObject& a) -> MapFn {
        Fields f = field_args(a);
        NormalizeOptions n = normalize_args(a);
        return [f, n](Example e, const MapContext&) {
          return apply(std::move(e), f, [&](const Tensor& t) { return normalize(t, n); });
        };
      });
}

}  // namespace

void register_image_functions(Registry& r) {
  register_decode_and_augment(r);
  register_resize_and_normalize(r);
}

}  // namespace dataecho
