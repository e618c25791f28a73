// FileListing (dataecho/formats/files.h): the ImageFolder walk, glob and list-file
// listings of the `files` source, stored compactly (one arena, offsets, sizes, labels).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "dataecho/core/error.h"
#include "dataecho/formats/files.h"

namespace dataecho {

const std::vector<std::string>& image_extensions() {
  static const std::vector<std::string> kExt = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                ".pgm", ".tif",  ".tiff", ".webp"};
  return kExt;
}

// Appends rows to a listing and hashes them.
class FileListingBuilder {
 public:
  explicit FileListingBuilder(std::string root) : l_(std::make_shared<FileListing>()) {
    if (!root.empty() && root.back() != '/') root += '/';
    l_->root_ = std::move(root);
    l_->offsets_.push_back(0);
  }
  const FileListing& listing() const { return *l_; }
  std::vector<std::string>& classes() { return l_->classes_; }
  std::vector<std::string>& columns() { return l_->columns_; }

  void add(std::string_view path, int64_t size, const int64_t* label,
           const std::vector<std::string_view>& cells = {}) {
    std::string& a = l_->arena_;
    a.append(path);
    for (auto c : cells) {
      a.push_back('\0');
      a.append(c);
    }
    if (a.size() > UINT32_MAX)
      throw_error(ErrorCode::kInvalidArgument, "files", "the listing's paths take more than 4 GiB",
                  l_->root_);
    const size_t begin = l_->offsets_.back();
    hash_bytes(a.data() + begin, a.size() - begin);
    hash_bytes("\n", 1);
    if (label) {
      l_->labels_.push_back(*label);
      hash_bytes(label, sizeof(*label));
    }
    l_->offsets_.push_back(static_cast<uint32_t>(a.size()));
    l_->sizes_.push_back(size);
  }
  void set_last_size(int64_t size) { l_->sizes_.back() = size; }

  std::shared_ptr<const FileListing> finish() {
    for (const auto& c : l_->columns_) hash_bytes(c.data(), c.size() + 1);
    l_->hash_ = h_;
    l_->arena_.shrink_to_fit();
    l_->offsets_.shrink_to_fit();
    l_->sizes_.shrink_to_fit();
    l_->labels_.shrink_to_fit();
    return l_;
  }

 private:
  void hash_bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 0x100000001b3ull;
  }
  std::shared_ptr<FileListing> l_;
  uint64_t h_ = 0xcbf29ce484222325ull;
};

namespace {

[[noreturn]] void listing_error(ErrorCode code, const std::string& what, const std::string& where) {
  throw Error(code, "files", what, where);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string local_path(const std::string& base_dir, std::string p) {
  if (p.rfind("file://", 0) == 0) p = p.substr(7);
  return p.empty() || p[0] == '/' || base_dir.empty() ? p : join(base_dir, p);
}

bool ends_with_ci(const std::string& name, const std::string& ext) {
  if (name.size() < ext.size()) return false;
  for (size_t i = 0; i < ext.size(); ++i) {
    unsigned char a = static_cast<unsigned char>(name[name.size() - ext.size() + i]);
    if (std::tolower(a) != std::tolower(static_cast<unsigned char>(ext[i]))) return false;
  }
  return true;
}

// One folder's subfolders and files (symbolic links followed, as os.walk(followlinks=True)
// and os.scandir().is_dir() do); a file's size is -1 when stat fails (a dangling link).
struct DirListing {
  std::vector<std::string> dirs;
  std::vector<std::pair<std::string, int64_t>> files;
};

template <class Keep>
DirListing read_dir(const std::string& path, const Keep& keep_file) {
  DirListing out;
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    int err = errno;
    listing_error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                  std::string("cannot read the folder: ") + std::strerror(err), path);
  }
  const int fd = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
    struct stat st;
    bool is_dir = e->d_type == DT_DIR;
    const bool unsure = e->d_type == DT_LNK || e->d_type == DT_UNKNOWN;
    bool stat_ok = false;
    if (unsure) {
      stat_ok = ::fstatat(fd, n, &st, 0) == 0;
      is_dir = stat_ok && S_ISDIR(st.st_mode);
    }
    if (is_dir) {
      out.dirs.emplace_back(n);
      continue;
    }
    std::string name(n);
    if (!keep_file(name)) continue;
    if (!unsure) stat_ok = ::fstatat(fd, n, &st, 0) == 0;
    out.files.emplace_back(std::move(name), stat_ok ? static_cast<int64_t>(st.st_size) : -1);
  }
  ::closedir(d);
  return out;
}

struct WalkedDir {
  std::string rel;  // relative to the class folder; "" for itself
  std::vector<std::pair<std::string, int64_t>> files;
};

// One class folder as torchvision's make_dataset walks it: sorted(os.walk(dir)), each
// folder's file names sorted.
template <class Keep>
std::vector<WalkedDir> walk_class(const std::string& dir, const Keep& keep) {
  std::vector<WalkedDir> out;
  std::vector<std::pair<std::string, int>> todo = {{"", 0}};
  while (!todo.empty()) {
    auto [rel, depth] = std::move(todo.back());
    todo.pop_back();
    if (depth > 64)
      listing_error(ErrorCode::kInvalidArgument, "folders nested more than 64 deep (a link loop?)",
                    join(dir, rel));
    DirListing l = read_dir(rel.empty() ? dir : join(dir, rel), keep);
    for (auto& sub : l.dirs) todo.emplace_back(rel.empty() ? sub : rel + "/" + sub, depth + 1);
    std::sort(l.files.begin(), l.files.end());
    out.push_back({std::move(rel), std::move(l.files)});
  }
  std::sort(out.begin(), out.end(),
            [](const WalkedDir& a, const WalkedDir& b) { return a.rel < b.rel; });
  return out;
}

std::shared_ptr<const FileListing> list_image_folder(const FilesOptions& o) {
  const std::string root = local_path(o.base_dir, o.root);
  if (root.rfind("http://", 0) == 0 || root.rfind("https://", 0) == 0)
    listing_error(ErrorCode::kInvalidArgument,
                  "an ImageFolder root must be a local folder; over http(s) give a \"list\"", root);
  std::vector<std::string> exts;
  for (const auto& e : o.extensions) exts.push_back(!e.empty() && e[0] != '.' ? "." + e : e);
  auto keep = [&exts](const std::string& name) {
    if (exts.empty()) return true;
    for (const auto& e : exts)
      if (ends_with_ci(name, e)) return true;
    return false;
  };
  FileListingBuilder b(root);
  b.classes() = image_folder_classes(root);
  std::string empty;
  const auto& classes = b.classes();
  for (size_t c = 0; c < classes.size(); ++c) {
    const int64_t label = static_cast<int64_t>(c);
    size_t found = 0;
    for (const auto& d : walk_class(join(root, classes[c]), keep)) {
      std::string prefix = classes[c] + "/" + (d.rel.empty() ? "" : d.rel + "/");
      for (const auto& [name, size] : d.files) b.add(prefix + name, size, &label);
      found += d.files.size();
    }
    if (found == 0) empty += (empty.empty() ? "" : ", ") + classes[c];
  }
  if (!empty.empty() && !o.allow_empty) {
    std::string e;
    for (const auto& x : exts) e += (e.empty() ? "" : " ") + x;
    listing_error(ErrorCode::kNotFound,
                  "no file of the extensions (" + e + ") in the class folder(s): " + empty +
                      " (\"allow_empty\": true keeps such classes)",
                  root);
  }
  return b.finish();
}

// The longest common folder ("/data/a/") of `paths`, all local or all URLs.
std::string common_folder(const std::vector<std::string>& paths) {
  std::string_view p = paths.front();
  size_t n = p.size();
  for (const auto& q : paths) {
    size_t i = 0;
    while (i < n && i < q.size() && q[i] == p[i]) ++i;
    n = i;
  }
  size_t slash = p.substr(0, n).rfind('/');
  return slash == std::string::npos ? "" : std::string(p.substr(0, slash + 1));
}

int64_t local_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

std::shared_ptr<const FileListing> list_uris(const FilesOptions& o) {
  std::vector<std::string> paths = expand_uris(o.uris, o.base_dir, o.stream);
  bool mixed = false;
  for (const auto& p : paths) mixed |= is_remote_uri(p) != is_remote_uri(paths.front());
  FileListingBuilder b(mixed ? "" : common_folder(paths));
  const size_t skip = b.listing().root().size();
  for (const auto& p : paths)
    b.add(std::string_view(p).substr(skip), is_remote_uri(p) ? -1 : local_size(p), nullptr);
  return b.finish();
}

constexpr size_t kMaxListBytes = size_t{1} << 30;

std::string read_text(const std::string& location, const StreamOptions& so) {
  std::string text;
  auto stream = open_stream(location, so);
  char buf[64 << 10];
  while (size_t n = stream->read(buf, sizeof(buf))) {
    text.append(buf, n);
    if (text.size() > kMaxListBytes)
      listing_error(ErrorCode::kInvalidArgument, "the list is larger than 1 GiB", location);
  }
  return text;
}

// The folder of a list ("http://h/d/l.csv?x" -> "http://h/d/", "/a/l.csv" -> "/a/").
std::string folder_of(std::string s) {
  if (is_remote_uri(s)) s = s.substr(0, s.find_first_of("?#"));
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? "" : s.substr(0, slash + 1);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// One line split into cells; with ',' a cell may be quoted ("a,b", "" for a quote).
// False for an unclosed quote.
bool split_cells(std::string_view line, char delim, std::vector<std::string>& cells) {
  cells.clear();
  size_t i = 0;
  for (;;) {
    std::string cell;
    std::string_view rest = line.substr(i);
    size_t lead = rest.find_first_not_of(' ');
    if (delim == ',' && lead != std::string_view::npos && rest[lead] == '"') {
      i += lead + 1;
      for (;; ++i) {
        if (i >= line.size()) return false;
        if (line[i] != '"') {
          cell += line[i];
        } else if (i + 1 < line.size() && line[i + 1] == '"') {
          cell += '"';
          ++i;
        } else {
          break;
        }
      }
      size_t end = line.find(delim, i + 1);
      cells.push_back(std::move(cell));
      if (end == std::string_view::npos) return true;
      i = end + 1;
      continue;
    }
    size_t end = line.find(delim, i);
    cells.emplace_back(trim(line.substr(i, end == std::string_view::npos ? end : end - i)));
    if (end == std::string_view::npos) return true;
    i = end + 1;
  }
}

bool parse_int64(std::string_view s, int64_t* v) {
  s = trim(s);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

struct ListFormat {
  char delim = ',';
  bool header = false;
  size_t width = 0;  // cells per row
};

// One data row of a list into the builder.
void add_list_row(FileListingBuilder& b, const std::vector<std::string>& cells, const ListFormat& f,
                  const std::string& where) {
  if (cells.size() != f.width)
    listing_error(
        ErrorCode::kInvalidArgument,
        std::to_string(cells.size()) + " cells where the first row has " + std::to_string(f.width),
        where);
  if (cells[0].empty()) listing_error(ErrorCode::kInvalidArgument, "an empty path", where);
  int64_t label = 0;
  if (f.width > 1 && !parse_int64(cells[1], &label))
    listing_error(ErrorCode::kInvalidArgument, "the label '" + cells[1] + "' is not an integer",
                  where);
  std::vector<std::string_view> rest;
  for (size_t c = 2; c < cells.size(); ++c) {
    if (cells[c].find('\0') != std::string::npos)
      listing_error(ErrorCode::kInvalidArgument, "a cell holds a NUL byte", where);
    rest.push_back(cells[c]);
  }
  b.add(cells[0], -1, f.width > 1 ? &label : nullptr, rest);
  const FileListing& l = b.listing();
  const std::string full = l.full_path(l.size() - 1);
  if (!is_remote_uri(full)) b.set_last_size(local_size(full));
}

std::shared_ptr<const FileListing> list_file(const FilesOptions& o) {
  const std::string location = is_remote_uri(o.list) ? o.list : local_path(o.base_dir, o.list);
  std::string text = read_text(location, o.stream);
  std::string root = o.base.empty()          ? folder_of(location)
                     : is_remote_uri(o.base) ? o.base
                                             : local_path(o.base_dir, o.base);
  FileListingBuilder b(root);
  ListFormat f;
  const std::string name = location.substr(0, location.find_first_of("?#"));
  f.delim = o.delimiter ? o.delimiter
                        : (ends_with_ci(name, ".tsv") || ends_with_ci(name, ".tab") ? '\t' : ',');
  std::vector<std::string> cells;
  size_t line_no = 0, start = 0;
  bool first = true;
  while (start < text.size()) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_no;
    const std::string where = location + " line " + std::to_string(line_no);
    if (trim(line).empty()) continue;
    if (!split_cells(line, f.delim, cells))
      listing_error(ErrorCode::kInvalidArgument, "a quote is not closed", where);
    if (first) {
      first = false;
      f.width = cells.size();
      int64_t v;
      f.header = o.header.value_or(cells.size() > 1 && !parse_int64(cells[1], &v));
      for (size_t c = 2; c < cells.size(); ++c)
        b.columns().push_back(f.header ? cells[c] : "column" + std::to_string(c));
      if (f.header) continue;
    }
    add_list_row(b, cells, f, where);
  }
  if (b.listing().size() == 0)
    listing_error(ErrorCode::kNotFound, "the list names no file", location);
  return b.finish();
}

}  // namespace

std::vector<std::string> image_folder_classes(const std::string& root) {
  DirListing l = read_dir(root, [](const std::string&) { return false; });
  if (l.dirs.empty()) listing_error(ErrorCode::kNotFound, "no class folder in the root", root);
  std::sort(l.dirs.begin(), l.dirs.end());
  return l.dirs;
}

std::map<std::string, int64_t> class_to_idx(const std::string& root) {
  std::map<std::string, int64_t> m;
  auto classes = image_folder_classes(root);
  for (size_t i = 0; i < classes.size(); ++i) m[classes[i]] = static_cast<int64_t>(i);
  return m;
}

std::shared_ptr<const FileListing> FileListing::make(const FilesOptions& o) {
  const int given = !o.root.empty() + !o.uris.empty() + !o.list.empty();
  if (given != 1)
    throw_error(ErrorCode::kInvalidArgument, "files",
                "give exactly one of root (an ImageFolder tree), uri (paths or globs) and list "
                "(a CSV or TSV file)");
  if (!o.root.empty()) return list_image_folder(o);
  if (!o.uris.empty()) return list_uris(o);
  return list_file(o);
}

std::string_view FileListing::path(size_t i) const {
  std::string_view row(arena_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]);
  return columns_.empty() ? row : row.substr(0, row.find('\0'));
}

std::string_view FileListing::cell(size_t i, size_t c) const {
  std::string_view row(arena_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]);
  size_t at = row.find('\0');
  for (size_t k = 0; k < c && at != std::string_view::npos; ++k) at = row.find('\0', at + 1);
  if (at == std::string_view::npos) return {};
  row = row.substr(at + 1);
  return row.substr(0, row.find('\0'));
}

std::string FileListing::full_path(size_t i) const {
  std::string_view p = path(i);
  if (is_remote_uri(std::string(p))) return std::string(p);
  if (p.rfind("file://", 0) == 0) return std::string(p.substr(7));
  if (!p.empty() && p[0] == '/') {
    if (!is_remote_uri(root_)) return std::string(p);
    size_t host = root_.find("//") + 2;
    return root_.substr(0, root_.find('/', host)) + std::string(p);
  }
  std::string s = root_;
  s.append(p);
  return s;
}

size_t FileListing::memory_bytes() const {
  size_t n = sizeof(*this) + arena_.capacity() + offsets_.capacity() * sizeof(uint32_t) +
             sizes_.capacity() * sizeof(int64_t) + labels_.capacity() * sizeof(int64_t);
  for (const auto& s : classes_) n += sizeof(s) + s.capacity();
  for (const auto& s : columns_) n += sizeof(s) + s.capacity();
  return n;
}

}  // namespace dataecho
