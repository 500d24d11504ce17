// "synthetic" and "synthetic-learnable": generated samples, each a pure function of
// (seed, split, index), so fetch is random access and two runs with one seed see the same data.
//
// Every sample owns a window of 2^32 words of its Philox stream (RngStream::seek(index << 32)):
// no sample ever draws another's numbers, whatever the shape.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dataset_options.h"
#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/core/parse_number.h"
#include "sample_batch.h"

namespace d5 {

namespace {

constexpr int kWindowBits = 32;
constexpr int64_t kPrototypeGrid = 4;

// n draws of N(0, sd^2): Box-Muller using both values of each pair, in float. RngStream::normal
// returns one value per two uniforms, which made noise generation the cost of a fetch.
void fill_normal(RngStream& rng, float* out, int64_t n, float sd) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  for (int64_t i = 0; i < n; i += 2) {
    const float u1 = (static_cast<float>(rng.next_u32() >> 8) + 1.0f) * 0x1p-24f;  // (0, 1]: finite log
    const float u2 = static_cast<float>(rng.next_u32() >> 8) * 0x1p-24f;
    const float r = sd * std::sqrt(-2.0f * std::log(u1));
    out[i] = r * std::cos(kTwoPi * u2);
    if (i + 1 < n) out[i + 1] = r * std::sin(kTwoPi * u2);
  }
}

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(const DatasetSpec& spec, bool learnable)
      : format_(learnable ? "synthetic-learnable" : "synthetic"),
        inputs_(spec.seed, fmt::format("{}/{}/inputs", format_, spec.split)),
        prototypes_(spec.seed, fmt::format("{}/prototypes", format_)),
        labels_(spec.seed, fmt::format("{}/{}/labels", format_, spec.split)),
        learnable_(learnable) {
    std::vector<std::string> known{"shape", "classes", "samples", "dtype"};
    if (learnable) known.push_back("noise");
    data::DatasetOptions options(spec, format_, known);
    options.check_all_known();
    D5_CHECK_ARG(spec.split == "train" || spec.split == "test", "{}: split '{}' does not exist (train or test)",
                 format_, spec.split);
    shape_ = parse_dims(options.get_string("shape", "1x28x28"), format_ + " option shape");
    classes_ = options.get_int("classes", 10, 1);
    size_ = options.get_int("samples", spec.split == "test" ? 1000 : 10000, 0);
    const std::string dtype = options.get_string("dtype", "f32");
    D5_CHECK_ARG(parse_dtype(dtype) == DType::f32, "{}: dtype={} is not supported; inputs are f32", format_, dtype);
    elements_ = Shape(shape_).numel();
    D5_CHECK_ARG(elements_ < (int64_t{1} << (kWindowBits - 2)), "{}: a sample of shape {} has too many elements",
                 format_, Shape(shape_).to_string());
    if (learnable_) noise_ = options.get_double("noise", 1.0);
    D5_CHECK_ARG(noise_ >= 0, "{}: noise={} must be non-negative", format_, noise_);
  }

  std::string name() const override { return format_; }
  int64_t size() const override { return size_; }
  int64_t classes() const override { return classes_; }
  std::map<std::string, TensorDesc> sample_descs() const override {
    return {{kDataInput, TensorDesc{DType::f32, Shape(shape_)}}, {kDataLabels, TensorDesc{DType::i64, Shape{}}}};
  }

  Batch fetch(std::span<const int64_t> indices) const override {
    const int64_t n = static_cast<int64_t>(indices.size());
    Batch batch = data::allocate_sample_batch(n, shape_);
    Tensor& input = batch.at(kDataInput);
    Tensor& labels = batch.at(kDataLabels);
    for (int64_t b = 0; b < n; ++b) {
      const int64_t i = indices[static_cast<size_t>(b)];
      const int64_t y = label(i);
      labels.data_as<int64_t>()[b] = y;
      float* x = input.data_as<float>() + b * elements_;
      RngStream rng = inputs_;
      rng.seek(static_cast<uint64_t>(i) << kWindowBits);
      if (learnable_) {
        fill_normal(rng, x, elements_, static_cast<float>(noise_));
        const std::vector<float> proto = prototype(y);
        for (int64_t e = 0; e < elements_; ++e) x[e] += proto[static_cast<size_t>(e)];
      } else {
        for (int64_t e = 0; e < elements_; ++e) x[e] = rng.uniform_float();
      }
    }
    return batch;
  }

  int64_t label(int64_t index) const override {
    D5_CHECK_ARG(index >= 0 && index < size_, "{}: sample index {} is outside [0, {})", format_, index, size_);
    RngStream rng = labels_;
    rng.seek(static_cast<uint64_t>(index) << kWindowBits);
    return static_cast<int64_t>(rng.below(static_cast<uint64_t>(classes_)));
  }

 private:
  // Class y's prototype: per channel plane, a grid of at most 4x4 cells with uniform [0, 1) values,
  // each cell a block of about H/4 x W/4 pixels. Coarse on purpose: per-pixel white noise would be
  // averaged away by convolutions and pooling, so a convolutional network could hardly learn it,
  // while blocks survive them. Rank-1 samples (feature vectors) get one value per element.
  std::vector<float> prototype(int64_t y) const {
    const size_t rank = shape_.size();
    const int64_t h = rank >= 2 ? shape_[rank - 2] : 1, w = shape_.back();
    const int64_t gh = std::min<int64_t>(h, kPrototypeGrid), gw = rank >= 2 ? std::min<int64_t>(w, kPrototypeGrid) : w;
    const int64_t planes = elements_ / (h * w);
    RngStream rng = prototypes_;
    rng.seek(static_cast<uint64_t>(y) << kWindowBits);
    std::vector<float> cells(static_cast<size_t>(planes * gh * gw));
    for (float& c : cells) c = rng.uniform_float();
    std::vector<float> out(static_cast<size_t>(elements_));
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j)
          out[static_cast<size_t>((p * h + i) * w + j)] = cells[static_cast<size_t>((p * gh + i * gh / h) * gw + j * gw / w)];
    return out;
  }

  std::string format_;
  RngStream inputs_;
  // One fixed image per class (window `class` of this stream), shared by both splits so that what
  // is learnt from train carries over to test. Regenerated per sample rather than stored: 1000
  // classes of 3x224x224 would be 600 MB.
  RngStream prototypes_;
  RngStream labels_;
  bool learnable_;
  std::vector<int64_t> shape_;
  int64_t classes_ = 0, size_ = 0, elements_ = 0;
  double noise_ = 0;
};

}  // namespace

std::vector<int64_t> parse_dims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t sep = text.find_first_of("x,", start);
    const std::string item = text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
    const int64_t d = parse_int(item).value_or(0);
    D5_CHECK_ARG(d > 0,
                 "{}: '{}' is not a shape; write positive extents separated by x, e.g. 1x28x28", what, text);
    dims.push_back(d);
    if (sep == std::string::npos) break;
    start = sep + 1;
  }
  return dims;
}

std::unique_ptr<Dataset> open_synthetic_dataset(const DatasetSpec& spec, bool learnable) {
  return std::make_unique<SyntheticDataset>(spec, learnable);
}

}  // namespace d5
