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
      labels_.resize(static_cast<size_t>(size_));
      convert_elements(labels.descr, map.bytes() + labels.data_offset, size_, labels_.data());
      int64_t max_label = -1;
      for (int64_t i = 0; i < size_; ++i) {
        const int64_t v = labels_[static_cast<size_t>(i)];
        D5_CHECK(v >= 0, FormatError, "'{}': label {} of sample {} (byte offset {}) is negative", labels_path, v, i,
                 labels.data_offset + i * labels.item_size);
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
    Batch batch = data::allocate_sample_batch(n, sample_shape_);
    Tensor& labels = batch.at(kDataLabels);
    float* x = batch.at(kDataInput).data_as<float>();
    const uint8_t* base = n > 0 ? inputs_map_->bytes() + inputs_.data_offset : nullptr;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t i = indices[static_cast<size_t>(b)];
      D5_CHECK_ARG(i >= 0 && i < size_, "npy: sample index {} is outside [0, {})", i, size_);
      float* dst = x + b * sample_elements_;
      convert_elements(inputs_.descr, base + i * sample_elements_ * inputs_.item_size, sample_elements_, dst);
      labels.data_as<int64_t>()[b] = labels_[static_cast<size_t>(i)];
    }
    return batch;
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
