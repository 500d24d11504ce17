// "mnist" and "fashion-mnist": the IDX files of a split, loaded into memory once (60,000 images
// are 47 MB as bytes) and converted to f32 per fetch.
#include <filesystem>

#include <fmt/format.h>

#include "dataset_options.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"
#include "sample_batch.h"

namespace d5 {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMnistClasses = 10;

// The file of `stem` in `dir`, gzip'd or raw (the gzip'd one wins when both exist).
std::string find_idx_file(const std::string& dir, const std::string& stem, const std::string& format,
                          const std::string& split) {
  for (const std::string& candidate : {stem + ".gz", stem})
    if (fs::exists(fs::path(dir) / candidate)) return (fs::path(dir) / candidate).string();
  D5_THROW(IoError,
           "{}: no {}[.gz] in '{}' (the {} split); pass --data-dir with the directory holding the IDX files, or run "
           "'d5 data download {} --split {}'",
           format, stem, dir, split, format, split);
}

class MnistDataset : public Dataset {
 public:
  MnistDataset(const DatasetSpec& spec) : format_(spec.name) {
    data::DatasetOptions options(spec, spec.name, {"normalize"});
    options.check_all_known();
    const std::vector<double> normalize = options.get_doubles("normalize", {0.0, 1.0});
    D5_CHECK_ARG(normalize.size() == 2 && normalize[1] > 0,
                 "{}: normalize=MEAN,STD takes two numbers with STD > 0 (MNIST's are 0.1307,0.3081), got {} values",
                 format_, normalize.size());
    mean_ = static_cast<float>(normalize[0]);
    inv_std_ = static_cast<float>(1.0 / normalize[1]);

    D5_CHECK_ARG(spec.split == "train" || spec.split == "test", "{}: split '{}' does not exist (train or test)",
                 format_, spec.split);
    const std::string dir = data::data_dir_for(spec);
    const std::string prefix = spec.split == "train" ? "train" : "t10k";
    const std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte", format_, spec.split);
    const std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte", format_, spec.split);
    IdxArray images = read_idx_file(images_path, kIdxImagesMagic);
    IdxArray labels = read_idx_file(labels_path, kIdxLabelsMagic);
    D5_CHECK(images.dims[0] == labels.dims[0], FormatError, "{}: '{}' holds {} images but '{}' holds {} labels",
             format_, images_path, images.dims[0], labels_path, labels.dims[0]);
    for (size_t i = 0; i < labels.data.size(); ++i)
      D5_CHECK(labels.data[i] < kMnistClasses, FormatError, "'{}': label {} at byte offset {} is not a class 0-9",
               labels_path, labels.data[i], 8 + i);
    size_ = images.dims[0];
    height_ = images.dims[1];
    width_ = images.dims[2];
    pixels_ = std::move(images.data);
    labels_ = std::move(labels.data);
  }

  std::string name() const override { return format_; }
  int64_t size() const override { return size_; }
  int64_t classes() const override { return kMnistClasses; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape{1, height_, width_}}},
            {kDataLabels, TensorDesc{DType::i64, Shape{}}}};
  }

  Batch fetch(std::span<const int64_t> indices) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    const int64_t pixels = height_ * width_;
    Batch batch = data::allocate_sample_batch(n, {1, height_, width_});
    float* x = batch.at(kDataInput).data_as<float>();
    int64_t* y = batch.at(kDataLabels).data_as<int64_t>();
    for (int64_t b = 0; b < n; ++b) {
      const int64_t i = indices[static_cast<size_t>(b)];
      check_index(i);
      const uint8_t* src = pixels_.data() + i * pixels;
      float* dst = x + b * pixels;
      for (int64_t p = 0; p < pixels; ++p) dst[p] = (static_cast<float>(src[p]) * (1.0f / 255.0f) - mean_) * inv_std_;
      y[b] = labels_[static_cast<size_t>(i)];
    }
    return batch;
  }

  int64_t label(int64_t index) const override {
    check_index(index);
    return labels_[static_cast<size_t>(index)];
  }

 private:
  void check_index(int64_t i) const {
    D5_CHECK_ARG(i >= 0 && i < size_, "{}: sample index {} is outside [0, {})", format_, i, size_);
  }

  std::string format_;
  int64_t size_ = 0, height_ = 0, width_ = 0;
  float mean_ = 0, inv_std_ = 1;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
};

}  // namespace

std::unique_ptr<Dataset> open_mnist_dataset(const DatasetSpec& spec) { return std::make_unique<MnistDataset>(spec); }

}  // namespace d5
