// "npy": a directory with inputs.npy ([N, ...], any supported dtype, converted to f32 per fetch)
// and labels.npy, read once and checked. The dataset option `labels` says what labels.npy holds:
// - classes (default): [N] or [N, 1] integers >= 0, one class per sample;
// - tokens: [N, T, ...] integers, a class per position (sequence labels); negative values mark
//   padding and must equal the trainer's ignore index (-100 unless --ignore-index says otherwise);
// - values: [N, ...] numbers of any supported dtype, regression targets fed as f32.
// The inputs are memory-mapped, so a set larger than memory works and opening costs no reading.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dataset_options.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"
#include "sample_batch.h"

namespace d5 {

namespace {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    D5_CHECK(fd >= 0, IoError, "cannot open '{}': {}", path, std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) == 0) size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    D5_CHECK(data_ != MAP_FAILED, IoError, "cannot map '{}': {}", path, std::strerror(err));
  }
  ~MappedFile() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Converts n elements of NPY dtype `descr` (little-endian, validated by read_npy_header) at `src`
// to Out. The dtype switch is outside the loop, so each case is a plain conversion loop.
template <typename Out>
void convert_elements(const std::string& descr, const uint8_t* src, int64_t n, Out* dst) {
  auto run = [&]<typename T>(T) {
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      dst[i] = static_cast<Out>(v);
    }
  };
  const std::string code = descr.substr(1);
  if (code == "f4") return run(float{});
  if (code == "f8") return run(double{});
  if (code == "u1") return run(uint8_t{});
  if (code == "u2") return run(uint16_t{});
  if (code == "i1") return run(int8_t{});
  if (code == "i2") return run(int16_t{});
  if (code == "i4") return run(int32_t{});
  if (code == "i8") return run(int64_t{});
  D5_THROW(Internal, "NPY dtype '{}' passed validation but has no conversion", descr);
}

enum class LabelKind { classes, tokens, values };

class NpyDataset : public Dataset {
 public:
  explicit NpyDataset(const DatasetSpec& spec) {
    data::DatasetOptions options(spec, "npy", {"classes", "labels"});
    options.check_all_known();
    const std::string kind = options.get_string("labels", "classes");
    D5_CHECK_ARG(kind == "classes" || kind == "tokens" || kind == "values",
                 "npy: labels={} is not one of classes, tokens, values", kind);
    kind_ = kind == "classes" ? LabelKind::classes : kind == "tokens" ? LabelKind::tokens : LabelKind::values;
    const std::string dir = data::data_dir_for(spec);
    inputs_path_ = (std::filesystem::path(dir) / "inputs.npy").string();
    labels_path_ = (std::filesystem::path(dir) / "labels.npy").string();
    for (const auto& p : {inputs_path_, labels_path_})
      D5_CHECK(std::filesystem::exists(p), IoError,
               "npy: '{}' does not exist; --data-dir must name a directory with inputs.npy and labels.npy", p);
    inputs_ = read_npy_header(inputs_path_);
    D5_CHECK(!inputs_.shape.empty(), FormatError, "'{}' holds a scalar; expected [samples, ...]", inputs_path_);
    size_ = inputs_.shape[0];
    sample_shape_.assign(inputs_.shape.begin() + 1, inputs_.shape.end());
    read_labels(options);
    if (size_ > 0) inputs_map_ = std::make_shared<MappedFile>(inputs_path_);
    sample_elements_ = Shape(sample_shape_).numel();
  }

  std::string name() const override { return "npy"; }
  int64_t size() const override { return size_; }
  int64_t classes() const override { return classes_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape(sample_shape_)}},
            {kDataLabels, TensorDesc{kind_ == LabelKind::values ? DType::f32 : DType::i64, Shape(label_shape_)}}};
  }

  Batch fetch(std::span<const int64_t> indices) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    Batch batch = data::allocate_sample_batch(n, sample_shape_);
    std::vector<int64_t> label_dims{n};
    label_dims.insert(label_dims.end(), label_shape_.begin(), label_shape_.end());
    Tensor labels = Tensor::uninitialized(TensorDesc{sample_descs().at(kDataLabels).dtype, Shape(label_dims)});
    float* x = batch.at(kDataInput).data_as<float>();
    const uint8_t* base = n > 0 ? inputs_map_->bytes() + inputs_.data_offset : nullptr;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t i = indices[static_cast<size_t>(b)];
      D5_CHECK_ARG(i >= 0 && i < size_, "npy: sample index {} is outside [0, {})", i, size_);
      float* dst = x + b * sample_elements_;
      convert_elements(inputs_.descr, base + i * sample_elements_ * inputs_.item_size, sample_elements_, dst);
      const auto from = static_cast<ptrdiff_t>(i * label_elements_);
      if (kind_ == LabelKind::values) {
        std::copy_n(values_.begin() + from, label_elements_, labels.data_as<float>() + b * label_elements_);
      } else {
        std::copy_n(labels_.begin() + from, label_elements_, labels.data_as<int64_t>() + b * label_elements_);
      }
    }
    batch[kDataLabels] = std::move(labels);
    return batch;
  }

  int64_t label(int64_t index) const override {
    D5_CHECK_ARG(kind_ == LabelKind::classes,
                 "npy: with labels={} a sample has no single class label (samplers and bias measures need one)",
                 kind_ == LabelKind::tokens ? "tokens" : "values");
    D5_CHECK_ARG(index >= 0 && index < size_, "npy: sample index {} is outside [0, {})", index, size_);
    return labels_[static_cast<size_t>(index)];
  }

 private:
  void read_labels(const data::DatasetOptions& options) {
    const NpyHeader h = read_npy_header(labels_path_);
    D5_CHECK(!h.shape.empty() && h.shape[0] == size_, FormatError, "'{}' holds {} samples but '{}' holds {} labels",
             inputs_path_, size_, labels_path_, h.shape.empty() ? 0 : h.shape[0]);
    if (kind_ == LabelKind::classes) {
      const bool column = h.shape.size() == 2 && h.shape[1] == 1;
      D5_CHECK(h.shape.size() == 1 || column, FormatError,
               "'{}' has shape ({}); class labels must be [N] or [N, 1] (labels=tokens reads a label per position)",
               labels_path_, fmt::join(h.shape, ", "));
    } else {
      label_shape_.assign(h.shape.begin() + 1, h.shape.end());
    }
    D5_CHECK(kind_ == LabelKind::values || h.descr[1] != 'f', FormatError,
             "'{}' holds {} values; class and token labels must be integers (labels=values reads numbers)",
             labels_path_, h.descr);
    label_elements_ = Shape(label_shape_).numel();
    const int64_t total = size_ * label_elements_;
    MappedFile map(labels_path_);
    if (kind_ == LabelKind::values) {
      values_.resize(static_cast<size_t>(total));
      convert_elements(h.descr, map.bytes() + h.data_offset, total, values_.data());
      return;
    }
    labels_.resize(static_cast<size_t>(total));
    convert_elements(h.descr, map.bytes() + h.data_offset, total, labels_.data());
    int64_t max_label = -1;
    for (int64_t i = 0; i < total; ++i) {
      const int64_t v = labels_[static_cast<size_t>(i)];
      D5_CHECK(v >= 0 || kind_ == LabelKind::tokens, FormatError,
               "'{}': label {} of sample {} (byte offset {}) is negative", labels_path_, v, i,
               h.data_offset + i * h.item_size);
      max_label = std::max(max_label, v);
    }
    classes_ = options.get_int("classes", std::max<int64_t>(max_label + 1, 1), 1);
    D5_CHECK(max_label < classes_, FormatError, "'{}': label {} is outside the {} classes given by classes={}",
             labels_path_, max_label, classes_, classes_);
  }

 private:
  LabelKind kind_ = LabelKind::classes;
  std::string inputs_path_, labels_path_;
  NpyHeader inputs_;
  std::shared_ptr<MappedFile> inputs_map_;
  std::vector<int64_t> sample_shape_;
  int64_t sample_elements_ = 0;
  int64_t size_ = 0, classes_ = 0;
  std::vector<int64_t> label_shape_;  // per sample: {} for classes
  int64_t label_elements_ = 1;
  std::vector<int64_t> labels_;  // classes and tokens
  std::vector<float> values_;    // values
};

}  // namespace

std::unique_ptr<Dataset> open_npy_dataset(const DatasetSpec& spec) { return std::make_unique<NpyDataset>(spec); }

}  // namespace d5
