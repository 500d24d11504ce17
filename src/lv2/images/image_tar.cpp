// "image-tar": ImageNet-style archives of <class_dir>/<file>.JPEG, read by offset (pread) through a
// stored index, decoded on a worker pool.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <zlib.h>

#include "deep500/metrics/atomic_file.h"
#include "deep500/core/error.h"
#include "deep500/train/image_datasets.h"
#include "lv2/images/tar_archive.h"
#include "image_common.h"
#include "register_images.h"

namespace d5 {

namespace fs = std::filesystem;

namespace {

constexpr char kIndexMagic[8] = {'D', '5', 'T', 'A', 'R', 'I', 'X', '1'};

struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

FileStamp stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) D5_THROW(IoError, "cannot stat '{}': {}", path, std::strerror(errno));
  return {static_cast<uint64_t>(st.st_size), int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

// Case-insensitive; `exts` in lower case.
bool has_extension(const std::string& path, std::initializer_list<const char*> exts) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(exts.begin(), exts.end(), [&](const char* e) { return ext == e; });
}

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the index is little-endian: x86-64 and aarch64 hosts
  out.append(b, sizeof(T));
}

struct Cursor {
  const std::string& bytes;
  const std::string& what;
  size_t pos = 0;
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str(uint32_t n) {
    need(n);
    std::string s = bytes.substr(pos, n);
    pos += n;
    return s;
  }
  void need(size_t n) const {
    D5_CHECK(bytes.size() - pos >= n, FormatError, "image-tar index '{}' is truncated at offset {}", what, pos);
  }
};

}  // namespace

std::string image_tar_index_path(const std::string& tar_path) { return tar_path + ".d5index"; }

ImageTarIndex build_image_tar_index(const std::string& tar_path) {
  TarReader reader(tar_path);
  D5_CHECK_ARG(!reader.gzip(),
               "image-tar '{}' is gzip-compressed; samples are read by offset, so decompress it first (gunzip)",
               tar_path);
  const FileStamp st = stamp(tar_path);
  struct Member {
    std::string path, cls;
    uint64_t offset, size;
  };
  std::vector<Member> members;
  std::set<std::string> classes;
  TarMember m;
  while (reader.next(m)) {
    if (!m.regular_file()) continue;
    if (has_extension(m.path, {".tar"})) {
      // ILSVRC2012_img_train.tar layout: one uncompressed tar per class, named after it. Its
      // members lie inside the outer file, so they are indexed with their absolute offsets.
      const std::string cls = fs::path(m.path).stem().string();
      TarReader nested(tar_path, m.data_offset, m.size, m.path);
      TarMember inner;
      while (nested.next(inner)) {
        if (!inner.regular_file() || !has_extension(inner.path, {".jpeg", ".jpg"})) continue;
        classes.insert(cls);
        members.push_back({m.path + "/" + inner.path, cls, inner.data_offset, inner.size});
      }
      continue;
    }
    if (!has_extension(m.path, {".jpeg", ".jpg"})) continue;
    const fs::path p(m.path);
    const std::string cls = p.parent_path().filename().string();
    D5_CHECK(!cls.empty(), FormatError,
             "image-tar '{}': member '{}' (header at offset {}) is not inside a class directory; members must be "
             "<class_dir>/<file>.JPEG",
             tar_path, m.path, m.header_offset);
    classes.insert(cls);
    members.push_back({m.path, cls, m.data_offset, m.size});
  }
  D5_CHECK(!members.empty(), FormatError, "image-tar '{}' has no <class_dir>/<file>.JPEG members", tar_path);
  ImageTarIndex index;
  index.tar_size = st.size;
  index.tar_mtime_ns = st.mtime_ns;
  index.classes.assign(classes.begin(), classes.end());
  index.entries.reserve(members.size());
  for (auto& mem : members) {
    const auto label = std::lower_bound(index.classes.begin(), index.classes.end(), mem.cls) - index.classes.begin();
    index.entries.push_back({mem.offset, mem.size, static_cast<int32_t>(label), std::move(mem.path)});
  }
  return index;
}

std::string serialize_image_tar_index(const ImageTarIndex& index) {
  std::string out(kIndexMagic, sizeof(kIndexMagic));
  put<uint64_t>(out, index.tar_size);
  put<int64_t>(out, index.tar_mtime_ns);
  put<uint32_t>(out, static_cast<uint32_t>(index.classes.size()));
  for (const auto& c : index.classes) {
    put<uint32_t>(out, static_cast<uint32_t>(c.size()));
    out += c;
  }
  put<uint64_t>(out, index.entries.size());
  for (const auto& e : index.entries) {
    put<uint64_t>(out, e.offset);
    put<uint64_t>(out, e.size);
    put<int32_t>(out, e.label);
    put<uint32_t>(out, static_cast<uint32_t>(e.path.size()));
    out += e.path;
  }
  put<uint32_t>(out, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(out.data()),
                                                 static_cast<uInt>(out.size()))));
  return out;
}

ImageTarIndex parse_image_tar_index(const std::string& bytes, const std::string& what) {
  D5_CHECK(bytes.size() >= sizeof(kIndexMagic) + 4 && std::memcmp(bytes.data(), kIndexMagic, sizeof(kIndexMagic)) == 0,
           FormatError, "'{}' is not a deep500 image-tar index (bad magic at offset 0)", what);
  const size_t body = bytes.size() - 4;
  uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, 4);
  const auto computed =
      static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(body)));
  D5_CHECK(stored == computed, FormatError, "image-tar index '{}' fails its CRC-32 check (offset {})", what, body);
  const std::string content = bytes.substr(0, body);
  Cursor c{content, what, sizeof(kIndexMagic)};
  ImageTarIndex index;
  index.tar_size = c.get<uint64_t>();
  index.tar_mtime_ns = c.get<int64_t>();
  const auto nclasses = c.get<uint32_t>();
  for (uint32_t i = 0; i < nclasses; ++i) index.classes.push_back(c.str(c.get<uint32_t>()));
  const auto n = c.get<uint64_t>();
  D5_CHECK(n <= content.size(), FormatError, "image-tar index '{}' declares {} entries at offset {}", what, n, c.pos);
  index.entries.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    ImageTarIndex::Entry e;
    e.offset = c.get<uint64_t>();
    e.size = c.get<uint64_t>();
    e.label = c.get<int32_t>();
    e.path = c.str(c.get<uint32_t>());
    // offset + size could wrap around: compared as size <= tar_size - offset instead.
    D5_CHECK(e.label >= 0 && static_cast<uint32_t>(e.label) < nclasses && e.size <= index.tar_size &&
                 e.offset <= index.tar_size - e.size,
             FormatError, "image-tar index '{}': entry {} is inconsistent (offset {})", what, i, c.pos);
    index.entries.push_back(std::move(e));
  }
  D5_CHECK(c.pos == content.size(), FormatError, "image-tar index '{}' has trailing bytes at offset {}", what, c.pos);
  return index;
}

ImageTarIndex load_image_tar_index(const std::string& tar_path, bool* rebuilt) {
  const std::string index_path = image_tar_index_path(tar_path);
  const FileStamp st = stamp(tar_path);
  if (fs::is_regular_file(index_path)) {
    std::ifstream in(index_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      ImageTarIndex index = parse_image_tar_index(ss.str(), index_path);
      if (index.tar_size == st.size && index.tar_mtime_ns == st.mtime_ns) {
        if (rebuilt) *rebuilt = false;
        return index;
      }
    } catch (const FormatError&) {  // a damaged cache is rebuilt, not fatal
    }
  }
  ImageTarIndex index = build_image_tar_index(tar_path);
  try {
    atomic_write(index_path, serialize_image_tar_index(index));
  } catch (const IoError&) {  // read-only dataset directory: the index lives in memory only
  }
  if (rebuilt) *rebuilt = true;
  return index;
}

namespace images {

namespace {

class ImageTarDataset final : public Dataset {
 public:
  explicit ImageTarDataset(const DatasetSpec& spec) {
    const data::DatasetOptions options(spec, spec.name, {"resize", "crop", "normalize", "threads"});
    options.check_all_known();
    check_split(spec);
    pre_ = preprocess_options(options, spec.name);
    D5_CHECK_ARG(!spec.data_dir.empty(), "dataset 'image-tar' needs --data-dir: the .tar file, or a directory "
                 "holding {}.tar", spec.split);
    const int threads = thread_option(options);
    path_ = locate(spec);
    index_ = load_image_tar_index(path_);
    pool_ = std::make_unique<WorkerPool>(threads);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);  // last: nothing after it can throw
    if (fd_ < 0) D5_THROW(IoError, "cannot open '{}': {}", path_, std::strerror(errno));
  }
  ~ImageTarDataset() override {
    if (fd_ >= 0) ::close(fd_);
  }

  std::string name() const override { return "image-tar"; }
  int64_t size() const override { return static_cast<int64_t>(index_.entries.size()); }
  int64_t classes() const override { return static_cast<int64_t>(index_.classes.size()); }
  std::map<std::string, TensorDesc> sample_descs() const override { return image_sample_descs(pre_); }
  int64_t label(int64_t index) const override { return entry(index).label; }

  Batch fetch(std::span<const int64_t> indices) const override {
    for (int64_t i : indices) entry(i);  // range errors before any work
    return decode_batch(*pool_, pre_, static_cast<int64_t>(indices.size()), [&](int64_t i, float* out) {
      const auto& e = entry(indices[static_cast<size_t>(i)]);
      std::vector<uint8_t> bytes(e.size);
      read_member(e, bytes);
      decode_jpeg_into(bytes, fmt::format("{}:{}", path_, e.path), pre_, out);
      return int64_t{e.label};
    });
  }

 private:
  static std::string locate(const DatasetSpec& spec) {
    const fs::path dir(spec.data_dir);
    if (fs::is_regular_file(dir)) return dir.string();
    std::vector<fs::path> candidates = {dir / (spec.split + ".tar")};
    if (spec.split == "test") candidates.push_back(dir / "val.tar");
    for (const auto& c : candidates) {
      if (fs::is_regular_file(c)) return c.string();
    }
    D5_THROW(IoError, "dataset 'image-tar': '{}' is neither a tar file nor a directory holding {}", spec.data_dir,
             candidates.front().filename().string());
  }

  const ImageTarIndex::Entry& entry(int64_t index) const {
    D5_CHECK_ARG(index >= 0 && index < size(), "dataset 'image-tar': index {} outside [0, {})", index, size());
    return index_.entries[static_cast<size_t>(index)];
  }

  void read_member(const ImageTarIndex::Entry& e, std::vector<uint8_t>& out) const {
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(e.offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) D5_THROW(IoError, "reading '{}' member '{}' failed: {}", path_, e.path, std::strerror(errno));
      D5_CHECK(got > 0, FormatError, "image-tar '{}' is truncated: member '{}' ends at offset {} ({} of {} bytes)",
               path_, e.path, e.offset + done, done, out.size());
      done += static_cast<size_t>(got);
    }
  }

  std::string path_;
  ImageTarIndex index_;
  ImagePreprocess pre_;
  int fd_ = -1;
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace

void register_image_tar() {
  register_dataset("image-tar",
                   "ImageNet-style tar of <class_dir>/<file>.JPEG, indexed once (<tar>.d5index), JPEGs decoded on a "
                   "thread pool; options resize, crop, normalize=none|imagenet, threads",
                   [](const DatasetSpec& s) { return std::make_unique<ImageTarDataset>(s); });
}

}  // namespace images
}  // namespace d5
