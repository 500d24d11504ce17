// "tfrecord": tf.Example records with a JPEG (image/encoded) and a class (image/class/label), as in
// the ImageNet TFRecords of TensorFlow's models repository.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

#include "deep500/core/error.h"
#include "lv2/images/tfrecord.h"
#include "image_common.h"
#include "register_images.h"

namespace d5::images {

namespace fs = std::filesystem;

namespace {

constexpr const char* kImageKey = "image/encoded";
constexpr const char* kLabelKey = "image/class/label";
constexpr int64_t kMaxClasses = int64_t{1} << 31;

// *.tfrecord, *.tfrecord-*, and the sharded <split>-NNNNN-of-NNNNN names of the ImageNet scripts.
// When some files carry a split prefix (train*, validation*, test*), only the requested split's are used.
std::vector<std::string> find_files(const DatasetSpec& spec) {
  const fs::path p(spec.data_dir);
  if (fs::is_regular_file(p)) return {p.string()};
  D5_CHECK(fs::is_directory(p), IoError, "dataset 'tfrecord': '{}' is neither a TFRecord file nor a directory",
           spec.data_dir);
  static const std::regex pattern(R"(.*\.tfrecord(-.*)?|(train|validation|test)-\d+-of-\d+)");
  std::vector<std::string> all;
  for (const auto& e : fs::directory_iterator(p)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && std::regex_match(name, pattern)) all.push_back(name);
  }
  const auto starts = [](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
  const bool split_named = std::any_of(all.begin(), all.end(), [&](const std::string& n) {
    return starts(n, "train") || starts(n, "validation") || starts(n, "test");
  });
  std::vector<std::string> out;
  for (const auto& n : all) {
    const bool wanted = spec.split == "train" ? starts(n, "train") : (starts(n, "validation") || starts(n, "test"));
    if (!split_named || wanted) out.push_back((p / n).string());
  }
  std::sort(out.begin(), out.end());
  D5_CHECK(!out.empty(), IoError, "dataset 'tfrecord': no {}TFRecord files (*.tfrecord, *.tfrecord-*, {}-NNNNN-of-NNNNN) in '{}'",
           split_named ? spec.split + " " : std::string(), spec.split == "train" ? "train" : "validation",
           spec.data_dir);
  return out;
}

class TfRecordDataset final : public Dataset {
 public:
  explicit TfRecordDataset(const DatasetSpec& spec) {
    const data::DatasetOptions options(spec, spec.name,
                                       {"resize", "crop", "normalize", "threads", "label_offset", "classes"});
    options.check_all_known();
    check_split(spec);
    pre_ = preprocess_options(options, spec.name);
    label_offset_ = options.get_int("label_offset", 0, -1000000, 1000000);
    D5_CHECK_ARG(!spec.data_dir.empty(), "dataset 'tfrecord' needs --data-dir: a TFRecord file or a directory of them");
    try {
      open_files(spec, options);
    } catch (...) {  // the destructor does not run for a constructor that throws
      close_files();
      throw;
    }
  }
  ~TfRecordDataset() override { close_files(); }

  std::string name() const override { return "tfrecord"; }
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  int64_t classes() const override { return classes_; }
  std::map<std::string, TensorDesc> sample_descs() const override { return image_sample_descs(pre_); }
  int64_t label(int64_t index) const override {
    check_index(index);
    return labels_.empty() ? read_label(index, nullptr) : labels_[static_cast<size_t>(index)];
  }

  Batch fetch(std::span<const int64_t> indices) const override {
    for (int64_t i : indices) check_index(i);
    return decode_batch(*pool_, pre_, static_cast<int64_t>(indices.size()), [&](int64_t i, float* out) {
      const int64_t idx = indices[static_cast<size_t>(i)];
      std::string image;
      const int64_t label = read_label(idx, &image);
      decode_jpeg_into({reinterpret_cast<const uint8_t*>(image.data()), image.size()}, where(idx), pre_, out);
      return label;
    });
  }

 private:
  struct File {
    std::string path;
    int fd;
  };
  struct Record {
    uint32_t file;
    TfRecordLocation loc;
  };

  void open_files(const DatasetSpec& spec, const data::DatasetOptions& options) {
    for (const auto& f : find_files(spec)) {
      const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) D5_THROW(IoError, "cannot open '{}': {}", f, std::strerror(errno));
      files_.push_back({f, fd});
      const auto file_index = static_cast<uint32_t>(files_.size() - 1);
      for (const auto& loc : scan_tfrecord_file(f)) records_.push_back({file_index, loc});
    }
    D5_CHECK(!records_.empty(), FormatError, "dataset 'tfrecord': the files in '{}' hold no records", spec.data_dir);
    classes_ = options.get_int("classes", 0, 1, kMaxClasses);
    pool_ = std::make_unique<WorkerPool>(thread_option(options));
    if (classes_ == 0) {
      // Without classes=N the label range is found by reading every record once (this also
      // verifies every data CRC). Pass classes=N to open large sets without the scan.
      labels_.resize(records_.size());
      pool_->parallel_for(size(), [&](int64_t i) { labels_[static_cast<size_t>(i)] = read_label(i, nullptr); });
      classes_ = *std::max_element(labels_.begin(), labels_.end()) + 1;
    }
  }

  void close_files() {
    for (const auto& f : files_) ::close(f.fd);
    files_.clear();
  }

  void check_index(int64_t index) const {
    D5_CHECK_ARG(index >= 0 && index < size(), "dataset 'tfrecord': index {} outside [0, {})", index, size());
  }
  std::string where(int64_t index) const {
    const Record& r = records_[static_cast<size_t>(index)];
    return fmt::format("{} (record at offset {})", files_[r.file].path, r.loc.offset);
  }

  // Reads and checks one record; returns its label and, when asked, moves out its JPEG bytes.
  int64_t read_label(int64_t index, std::string* image) const {
    const Record& r = records_[static_cast<size_t>(index)];
    const File& f = files_[r.file];
    const std::vector<uint8_t> data = read_tfrecord(f.fd, f.path, r.loc);
    TfExample ex = parse_tf_example(data, where(index));
    auto lab = ex.find(kLabelKey);
    D5_CHECK(lab != ex.end() && lab->second.kind == TfFeature::Kind::Int64 && lab->second.ints.size() == 1,
             FormatError, "{}: tf.Example has no single int64 '{}'", where(index), kLabelKey);
    // Without classes=N the bound is the most classes=N allows, so that the class count (the
    // largest label + 1) fits; the subtraction is checked, a stored label may be any int64.
    const int64_t stored = lab->second.ints[0];
    const int64_t limit = classes_ == 0 ? kMaxClasses : classes_;
    int64_t label = 0;
    D5_CHECK(!__builtin_sub_overflow(stored, label_offset_, &label) && label >= 0 && label < limit, FormatError,
             "{}: stored label {} minus label_offset={} is outside [0, {}); ImageNet TFRecords count from 1: pass "
             "label_offset=1",
             where(index), stored, label_offset_, limit);
    if (image) {
      auto img = ex.find(kImageKey);
      D5_CHECK(img != ex.end() && img->second.kind == TfFeature::Kind::Bytes && img->second.bytes.size() == 1,
               FormatError, "{}: tf.Example has no single bytes '{}'", where(index), kImageKey);
      *image = std::move(img->second.bytes[0]);
    }
    return label;
  }

  std::vector<File> files_;
  std::vector<Record> records_;
  std::vector<int64_t> labels_;  // filled at open when classes is not given
  ImagePreprocess pre_;
  int64_t label_offset_ = 0, classes_ = 0;
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace

void register_tfrecord() {
  register_dataset("tfrecord",
                   "TFRecord files of tf.Example (image/encoded JPEG, image/class/label); options resize, crop, "
                   "normalize, threads, label_offset, classes",
                   [](const DatasetSpec& s) { return std::make_unique<TfRecordDataset>(s); });
}

}  // namespace d5::images
