// "npy": a directory with inputs.npy ([N, ...], any supported dtype, converted to f32 per fetch)
// and labels.npy ([N] or [N, 1], integers). The inputs are memory-mapped, so a set larger than
// memory works and opening costs no reading; the labels are read once and checked.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dataset_options.h"
#include "deep500/dataset_formats.h"
#include "deep500/error.h"

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

// Element i of an array of NPY dtype `descr` (little-endian, validated by read_npy_header).
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
double element(const std::string& descr, const uint8_t* base, int64_t i) {
  const char kind = descr[1], size = descr[2];
  switch (kind) {
    case 'f': return size == '4' ? load<float>(base + 4 * i) : load<double>(base + 8 * i);
    case 'u': return size == '1' ? base[i] : load<uint16_t>(base + 2 * i);
    default:
      switch (size) {
        case '1': return static_cast<int8_t>(base[i]);
        case '2': return load<int16_t>(base + 2 * i);
        case '4': return load<int32_t>(base + 4 * i);
        default: return static_cast<double>(load<int64_t>(base + 8 * i));
      }
  }
}

class NpyDataset : public Dataset {
 public:
  explicit NpyDataset(const DatasetSpec& spec) {
    data::DatasetOptions options(spec, "npy", {"classes"});
    options.check_all_known();
    const std::string dir = data::data_dir_for(spec);
    inputs_path_ = (std::filesystem::path(dir) / "inputs.npy").string();
    const std::string labels_path = (std::filesystem::path(dir) / "labels.npy").string();
    for (const auto& p : {inputs_path_, labels_path})
      D5_CHECK(std::filesystem::exists(p), IoError,
               "npy: '{}' does not exist; --data-dir must name a directory with inputs.npy and labels.npy", p);
    inputs_ = read_npy_header(inputs_path_);
    const NpyHeader labels = read_npy_header(labels_path);
    D5_CHECK(!inputs_.shape.empty(), FormatError, "'{}' holds a scalar; expected [samples, ...]", inputs_path_);
    size_ = inputs_.shape[0];
    sample_shape_.assign(inputs_.shape.begin() + 1, inputs_.shape.end());
    D5_CHECK(labels.descr[1] != 'f', FormatError, "'{}' holds {} values; labels must be integers (class indices)",
             labels_path, labels.descr);
    const bool column = labels.shape.size() == 2 && labels.shape[1] == 1;
    D5_CHECK(labels.shape.size() == 1 || column, FormatError, "'{}' has shape ({}); labels must be [N] or [N, 1]",
             labels_path, fmt::join(labels.shape, ", "));
    D5_CHECK(labels.shape[0] == size_, FormatError, "'{}' holds {} samples but '{}' holds {} labels", inputs_path_,
             size_, labels_path, labels.shape[0]);

    {
      MappedFile map(labels_path);
      const uint8_t* base = map.bytes() + labels.data_offset;
      labels_.resize(static_cast<size_t>(size_));
      int64_t max_label = -1;
      for (int64_t i = 0; i < size_; ++i) {
        const int64_t v = static_cast<int64_t>(element(labels.descr, base, i));
        D5_CHECK(v >= 0, FormatError, "'{}': label {} of sample {} (byte offset {}) is negative", labels_path, v, i,
                 labels.data_offset + i * labels.item_size);
        labels_[static_cast<size_t>(i)] = v;
        max_label = std::max(max_label, v);
      }
      classes_ = options.get_int("classes", max_label + 1, 1);
      D5_CHECK(max_label < classes_, FormatError, "'{}': label {} is outside the {} classes given by classes={}",
               labels_path, max_label, classes_, classes_);
    }
    if (size_ > 0) inputs_map_ = std::make_shared<MappedFile>(inputs_path_);
    sample_elements_ = Shape(sample_shape_).numel();
  }

  std::string name() const override { return "npy"; }
  int64_t size() const override { return size_; }
  int64_t classes() const override { return classes_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape(sample_shape_)}}, {kDataLabels, TensorDesc{DType::i64, Shape{}}}};
  }

  Batch fetch(std::span<const int64_t> indices) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    std::vector<int64_t> dims{n};
    dims.insert(dims.end(), sample_shape_.begin(), sample_shape_.end());
    Tensor input = Tensor::uninitialized(TensorDesc{DType::f32, Shape(dims)});
    Tensor labels = Tensor::uninitialized(TensorDesc{DType::i64, Shape{n}});
    float* x = input.data_as<float>();
    const uint8_t* base = n > 0 ? inputs_map_->bytes() + inputs_.data_offset : nullptr;
    const bool is_f32 = inputs_.descr == "<f4";
    for (int64_t b = 0; b < n; ++b) {
      const int64_t i = indices[static_cast<size_t>(b)];
      D5_CHECK_ARG(i >= 0 && i < size_, "npy: sample index {} is outside [0, {})", i, size_);
      float* dst = x + b * sample_elements_;
      const int64_t first = i * sample_elements_;
      if (is_f32) {
        std::memcpy(dst, base + first * 4, static_cast<size_t>(sample_elements_) * 4);
      } else {
        for (int64_t e = 0; e < sample_elements_; ++e)
          dst[e] = static_cast<float>(element(inputs_.descr, base, first + e));
      }
      labels.data_as<int64_t>()[b] = labels_[static_cast<size_t>(i)];
    }
    return {{kDataInput, std::move(input)}, {kDataLabels, std::move(labels)}};
  }

  int64_t label(int64_t index) const override {
    D5_CHECK_ARG(index >= 0 && index < size_, "npy: sample index {} is outside [0, {})", index, size_);
    return labels_[static_cast<size_t>(index)];
  }

 private:
  std::string inputs_path_;
  NpyHeader inputs_;
  std::shared_ptr<MappedFile> inputs_map_;
  std::vector<int64_t> sample_shape_;
  int64_t sample_elements_ = 0;
  int64_t size_ = 0, classes_ = 0;
  std::vector<int64_t> labels_;
};

}  // namespace

std::unique_ptr<Dataset> open_npy_dataset(const DatasetSpec& spec) { return std::make_unique<NpyDataset>(spec); }

}  // namespace d5
