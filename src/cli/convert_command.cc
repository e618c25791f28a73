// `dataecho convert`: IDX files or a class_name/file.jpg directory to TFRecord shards,
// tar shards or that directory layout; text files to TFRecord or tar shards (see
// dataecho/formats/convert.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "dataecho/formats/convert.h"

namespace dataecho::cli {
namespace {

// "\n", "\t", "\r" and "\\" typed on a command line as two characters each.
std::string unescape_separator(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
  }
  if (out.empty()) throw CLI::ValidationError("--separator", "may not be empty");
  return out;
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "convert IDX files, an image directory or text files to TFRecord, tar or directory shards");
  cmd->add_option("--images", o->idx_images, "IDX images file (e.g. train-images-idx3-ubyte.gz)");
  cmd->add_option("--labels", o->idx_labels, "IDX labels file");
  cmd->add_option("--dir", o->input_dir, "input directory in the class_name/file.jpg layout");
  cmd->add_option("--text", o->text,
                  "text files (paths, globs, brace ranges, @manifests; gzip is inflated): one "
                  "record per line, per document between --separator, or per --jsonl object")
      ->expected(1, -1);
  cmd->add_option("--separator", o->separator,
                  "what ends a text record (\\n and \\t are escapes; default: a newline)");
  cmd->add_flag("--jsonl", o->jsonl, "text files are JSON Lines: each record is the --field key");
  cmd->add_option("--field", o->field, "--jsonl: the string key to write")->capture_default_str();
  cmd->add_option("--max-bytes", o->max_bytes, "a longer text record is an error")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--to", o->to, "output format")
      ->check(CLI::IsMember({"tfrecord", "tar", "dir"}))
      ->capture_default_str();
  cmd->add_option("--out", o->out_dir, "output directory")->required();
  cmd->add_option("--name", o->name, "shard file name prefix")->capture_default_str();
  cmd->add_option("--shards", o->shards, "number of output shards")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--encode", o->encode,
                  "image encoding (IDX default png; directories keep their bytes unless given)")
      ->check(CLI::IsMember({"png", "jpeg"}));
  cmd->add_option("--quality", o->quality, "JPEG quality")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--resize", o->resize, "resize every image to S x S")
      ->check(CLI::Range(1, 16384));
  cmd->add_option("--channels", o->channels, "3: grayscale becomes RGB")
      ->check(CLI::IsMember({0, 1, 3}));
  cmd->add_option("--limit", o->limit, "first N examples only");
  auto images = cmd->get_option("--images");
  auto dir = cmd->get_option("--dir");
  auto text = cmd->get_option("--text");
  images->excludes(dir);
  text->excludes(images)->excludes(dir);
  cmd->get_option("--separator")->excludes("--jsonl");
  cmd->callback([o] {
    if (o->idx_images.empty() && o->input_dir.empty() && o->text.empty())
      throw CLI::ValidationError("convert", "give --images, --dir or --text");
    o->separator = unescape_separator(o->separator);
    bool tty = ::isatty(2);
    auto start = std::chrono::steady_clock::now();
    auto last = start;
    auto progress = [&](int64_t done, int64_t total, int64_t bytes) {
      if (!tty) return;
      auto now = std::chrono::steady_clock::now();
      if (done != total && now - last < std::chrono::milliseconds(200)) return;
      last = now;
      double s = std::chrono::duration<double>(now - start).count();
      std::fprintf(
          stderr, "\rconvert: %lld/%lld records (%.0f%%), %.1f MB, %.0f records/s   ",
          static_cast<long long>(done), static_cast<long long>(total),
          total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
          static_cast<double>(bytes) / 1e6, s > 0 ? static_cast<double>(done) / s : 0.0);
      if (done == total) std::fprintf(stderr, "\n");
    };
    ConvertSummary sum = convert_dataset(*o, progress);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string what = o->encode.empty() ? "as stored" : o->encode;
    if (o->resize > 0) what += ", " + std::to_string(o->resize) + "x" + std::to_string(o->resize);
    if (!o->text.empty()) what = o->jsonl ? "text from JSON Lines key " + o->field : "text";
    std::cout << "convert: " << sum.files << " files, " << sum.records << " records, " << sum.bytes
              << " bytes in " << o->out_dir << " (" << o->to << ", " << what << ") in "
              << static_cast<int64_t>(s * 1000) / 1000.0 << " s\n";
  });
}

}  // namespace dataecho::cli
