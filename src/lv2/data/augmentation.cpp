#include "deep500/train/augmentation.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/train/dataset_formats.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"
#include "deep500/core/parse_number.h"

namespace d5 {

namespace {

// The geometry of an image batch: N images of `channels` planes of height x width.
struct ImageBatch {
  Tensor* tensor;
  int64_t n, channels, height, width;
};

ImageBatch image_batch(Batch& batch, std::span<const int64_t> indices, const std::string& who) {
  auto it = batch.find(kDataInput);
  D5_CHECK_ARG(it != batch.end(), "{}: the batch has no '{}' tensor", who, kDataInput);
  Tensor& t = it->second;
  D5_CHECK_ARG(t.dtype() == DType::f32 && t.shape().rank() >= 3,
               "{}: '{}' is {}; augmentation takes f32 images [N, C, H, W] (or [N, H, W])", who, kDataInput,
               t.desc().to_string());
  const auto& d = t.shape().dims();
  D5_CHECK_ARG(d[0] == static_cast<int64_t>(indices.size()), "{}: batch of {} samples but {} indices", who, d[0],
               indices.size());
  int64_t channels = 1;
  for (size_t i = 1; i + 2 < d.size(); ++i) channels *= d[i];
  return {&t, d[0], channels, d[d.size() - 2], d[d.size() - 1]};
}

// The random stream of one sample in one epoch: a pure function of (seed, name, epoch, index).
class SampleStreams {
 public:
  SampleStreams(uint64_t seed, std::string_view name, int64_t epoch)
      : epoch_stream_(RngStream(seed, name).child(std::to_string(epoch))) {}
  RngStream at(int64_t index) const {
    RngStream s = epoch_stream_;
    s.seek(static_cast<uint64_t>(index) << 32);
    return s;
  }

 private:
  RngStream epoch_stream_;
};

}  // namespace

RandomCrop::RandomCrop(int64_t padding, uint64_t seed, int64_t height, int64_t width)
    : padding_(padding), height_(height), width_(width), seed_(seed) {
  D5_CHECK_ARG(padding >= 0 && height >= 0 && width >= 0, "random crop: padding {} and size {}x{} must be >= 0",
               padding, height, width);
}

std::string RandomCrop::describe() const {
  return height_ ? fmt::format("random crop {}x{} with zero padding {}", height_, width_, padding_)
                 : fmt::format("random crop with zero padding {}", padding_);
}

void RandomCrop::apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const {
  const ImageBatch in = image_batch(batch, indices, "random crop");
  const int64_t oh = height_ ? height_ : in.height, ow = width_ ? width_ : in.width;
  D5_CHECK_ARG(oh <= in.height + 2 * padding_ && ow <= in.width + 2 * padding_,
               "random crop: a {}x{} window does not fit a {}x{} image padded by {}", oh, ow, in.height, in.width,
               padding_);
  std::vector<int64_t> dims = in.tensor->shape().dims();
  dims[dims.size() - 2] = oh;
  dims[dims.size() - 1] = ow;
  Tensor out(TensorDesc{DType::f32, Shape(dims)});  // zero-filled: the padding
  const SampleStreams streams(seed_, "random-crop", epoch);
  const float* src = in.tensor->data_as<float>();
  float* dst = out.data_as<float>();
  for (int64_t b = 0; b < in.n; ++b) {
    RngStream rng = streams.at(indices[static_cast<size_t>(b)]);
    // Window origin in padded coordinates, shifted back into the image's.
    const int64_t y0 = static_cast<int64_t>(rng.below(static_cast<uint64_t>(in.height + 2 * padding_ - oh + 1))) - padding_;
    const int64_t x0 = static_cast<int64_t>(rng.below(static_cast<uint64_t>(in.width + 2 * padding_ - ow + 1))) - padding_;
    const int64_t x_lo = std::max<int64_t>(0, -x0), x_hi = std::min(ow, in.width - x0);
    for (int64_t c = 0; c < in.channels; ++c) {
      const float* plane = src + (b * in.channels + c) * in.height * in.width;
      float* out_plane = dst + (b * in.channels + c) * oh * ow;
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t sy = y0 + y;
        if (sy < 0 || sy >= in.height || x_lo >= x_hi) continue;
        std::memcpy(out_plane + y * ow + x_lo, plane + sy * in.width + x0 + x_lo,
                    static_cast<size_t>(x_hi - x_lo) * sizeof(float));
      }
    }
  }
  *in.tensor = std::move(out);
}

HorizontalFlip::HorizontalFlip(uint64_t seed, double probability) : seed_(seed), probability_(probability) {
  D5_CHECK_ARG(probability >= 0 && probability <= 1, "horizontal flip: probability {} is outside [0, 1]", probability);
}

std::string HorizontalFlip::describe() const { return fmt::format("horizontal flip (p={})", probability_); }

void HorizontalFlip::apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const {
  const ImageBatch in = image_batch(batch, indices, "horizontal flip");
  const SampleStreams streams(seed_, "horizontal-flip", epoch);
  float* data = in.tensor->data_as<float>();
  for (int64_t b = 0; b < in.n; ++b) {
    RngStream rng = streams.at(indices[static_cast<size_t>(b)]);
    if (!(rng.uniform() < probability_)) continue;
    for (int64_t row = 0; row < in.channels * in.height; ++row) {
      float* r = data + (b * in.channels * in.height + row) * in.width;
      std::reverse(r, r + in.width);
    }
  }
}

Normalize::Normalize(std::vector<double> mean, std::vector<double> stddev)
    : mean_(std::move(mean)), stddev_(std::move(stddev)) {
  D5_CHECK_ARG(!mean_.empty() && mean_.size() == stddev_.size(),
               "normalize: {} means and {} standard deviations; give one pair per channel", mean_.size(),
               stddev_.size());
  for (double s : stddev_) D5_CHECK_ARG(s > 0, "normalize: standard deviation {} must be positive", s);
}

std::string Normalize::describe() const {
  return fmt::format("normalize mean ({}) std ({})", fmt::join(mean_, ", "), fmt::join(stddev_, ", "));
}

void Normalize::apply(Batch& batch, std::span<const int64_t> /*indices*/, int64_t /*epoch*/) const {
  auto it = batch.find(kDataInput);
  D5_CHECK_ARG(it != batch.end(), "normalize: the batch has no '{}' tensor", kDataInput);
  Tensor& t = it->second;
  D5_CHECK_ARG(t.dtype() == DType::f32 && t.shape().rank() >= 2, "normalize: '{}' is {}; it takes f32 [N, C, ...]",
               kDataInput, t.desc().to_string());
  const int64_t n = t.shape()[0], c = t.shape()[1];
  const int64_t inner = c == 0 || n == 0 ? 0 : t.numel() / (n * c);
  D5_CHECK_ARG(mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == c,
               "normalize: {} channel means for an input with {} channels", mean_.size(), c);
  float* x = t.data_as<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(ch);
      const float m = static_cast<float>(mean_[k]), inv = static_cast<float>(1.0 / stddev_[k]);
      float* p = x + (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i) p[i] = (p[i] - m) * inv;
    }
}

Cutout::Cutout(int64_t size, uint64_t seed, double probability)
    : size_(size), seed_(seed), probability_(probability) {
  D5_CHECK_ARG(size > 0, "cutout: size {} must be positive", size);
  D5_CHECK_ARG(probability >= 0 && probability <= 1, "cutout: probability {} is outside [0, 1]", probability);
}

std::string Cutout::describe() const { return fmt::format("cutout {}x{} (p={})", size_, size_, probability_); }

void Cutout::apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const {
  const ImageBatch in = image_batch(batch, indices, "cutout");
  const SampleStreams streams(seed_, "cutout", epoch);
  float* data = in.tensor->data_as<float>();
  for (int64_t b = 0; b < in.n; ++b) {
    RngStream rng = streams.at(indices[static_cast<size_t>(b)]);
    if (!(rng.uniform() < probability_)) continue;
    const int64_t cy = static_cast<int64_t>(rng.below(static_cast<uint64_t>(in.height)));
    const int64_t cx = static_cast<int64_t>(rng.below(static_cast<uint64_t>(in.width)));
    const int64_t y0 = std::max<int64_t>(0, cy - size_ / 2), y1 = std::min(in.height, cy - size_ / 2 + size_);
    const int64_t x0 = std::max<int64_t>(0, cx - size_ / 2), x1 = std::min(in.width, cx - size_ / 2 + size_);
    for (int64_t c = 0; c < in.channels; ++c) {
      float* plane = data + (b * in.channels + c) * in.height * in.width;
      for (int64_t y = y0; y < y1; ++y) std::fill(plane + y * in.width + x0, plane + y * in.width + x1, 0.0f);
    }
  }
}

TransformSequence::TransformSequence(std::vector<std::unique_ptr<BatchTransform>> transforms)
    : transforms_(std::move(transforms)) {}

std::string TransformSequence::describe() const {
  std::vector<std::string> parts;
  for (const auto& t : transforms_) parts.push_back(t->describe());
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", then "));
}

void TransformSequence::apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const {
  for (const auto& t : transforms_) t->apply(batch, indices, epoch);
}

namespace {

double parse_number(const std::string& text, const std::string& item) {
  const std::optional<double> v = parse_double(text);
  D5_CHECK_ARG(v.has_value(), "augmentation '{}': '{}' is not a number", item, text);
  return *v;
}

std::vector<double> parse_numbers(const std::string& text, const std::string& item) {
  std::vector<double> out;
  size_t start = 0;
  while (true) {
    const size_t slash = text.find('/', start);
    out.push_back(parse_number(text.substr(start, slash - start), item));
    if (slash == std::string::npos) return out;
    start = slash + 1;
  }
}

}  // namespace

std::unique_ptr<TransformSequence> parse_augmentation(const std::string& spec, uint64_t seed) {
  std::vector<std::unique_ptr<BatchTransform>> out;
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string kind = item.substr(0, eq);
    const std::string arg = eq == std::string::npos ? "" : item.substr(eq + 1);
    const size_t colon = arg.find(':');
    const std::string first = arg.substr(0, colon), second = colon == std::string::npos ? "" : arg.substr(colon + 1);
    if (kind == "crop") {
      D5_CHECK_ARG(!first.empty(), "augmentation '{}': write crop=PADDING or crop=PADDING:HxW", item);
      int64_t h = 0, w = 0;
      if (!second.empty()) {
        const auto dims = parse_dims(second, "augmentation '" + item + "'");
        D5_CHECK_ARG(dims.size() == 2, "augmentation '{}': the crop size is HxW", item);
        h = dims[0];
        w = dims[1];
      }
      out.push_back(std::make_unique<RandomCrop>(static_cast<int64_t>(parse_number(first, item)), seed, h, w));
    } else if (kind == "flip") {
      out.push_back(std::make_unique<HorizontalFlip>(seed, arg.empty() ? 0.5 : parse_number(arg, item)));
    } else if (kind == "cutout") {
      D5_CHECK_ARG(!first.empty(), "augmentation '{}': write cutout=SIZE or cutout=SIZE:P", item);
      out.push_back(std::make_unique<Cutout>(static_cast<int64_t>(parse_number(first, item)), seed,
                                             second.empty() ? 1.0 : parse_number(second, item)));
    } else if (kind == "normalize") {
      D5_CHECK_ARG(!second.empty(), "augmentation '{}': write normalize=MEAN:STD (per channel MEAN/MEAN/...)", item);
      out.push_back(std::make_unique<Normalize>(parse_numbers(first, item), parse_numbers(second, item)));
    } else {
      D5_THROW(InvalidArgument, "augmentation '{}': unknown transform '{}' (known: crop, flip, cutout, normalize)",
               item, kind);
    }
  }
  return std::make_unique<TransformSequence>(std::move(out));
}

}  // namespace d5
