#pragma once
// Level 2: data augmentation as BatchTransforms (docs/augmentation.md). Each works on the batch's
// "input" tensor, f32 [N, C, H, W] (any rank >= 3: the last two axes are height and width, the
// ones between batch and height are channels). Random choices are drawn from a Philox stream keyed
// by (seed, transform, epoch) at the window of the sample's dataset index, so they depend only on
// (seed, epoch, sample index): never on batch composition, order or thread timing.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deep500/train/dataset.h"

namespace d5 {

// Pads each image with `padding` zeros on every side and takes a height x width window at a
// random offset (uniform over the valid ones). 0 for height/width: the input's size, the usual
// "pad 4, crop back to 32" of CIFAR training.
class RandomCrop : public BatchTransform {
 public:
  RandomCrop(int64_t padding, uint64_t seed, int64_t height = 0, int64_t width = 0);
  std::string describe() const override;
  void apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const override;

 private:
  int64_t padding_, height_, width_;
  uint64_t seed_;
};

// Mirrors each image left-right with probability p.
class HorizontalFlip : public BatchTransform {
 public:
  explicit HorizontalFlip(uint64_t seed, double probability = 0.5);
  std::string describe() const override;
  void apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const override;

 private:
  uint64_t seed_;
  double probability_;
};

// x <- (x - mean[c]) / std[c] per channel (axis 1); one value applies to every channel.
// Deterministic.
class Normalize : public BatchTransform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> stddev);
  std::string describe() const override;
  void apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const override;

 private:
  std::vector<double> mean_, stddev_;
};

// Cutout (DeVries and Taylor, 2017): with probability p, zeroes a size x size square in every
// channel, centred at a uniformly random pixel and clipped at the image border (so near a border
// less than size^2 pixels are cut).
class Cutout : public BatchTransform {
 public:
  Cutout(int64_t size, uint64_t seed, double probability = 1.0);
  std::string describe() const override;
  void apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const override;

 private:
  int64_t size_;
  uint64_t seed_;
  double probability_;
};

// Applies transforms in order.
class TransformSequence : public BatchTransform {
 public:
  explicit TransformSequence(std::vector<std::unique_ptr<BatchTransform>> transforms);
  std::string describe() const override;
  void apply(Batch& batch, std::span<const int64_t> indices, int64_t epoch) const override;
  size_t size() const { return transforms_.size(); }

 private:
  std::vector<std::unique_ptr<BatchTransform>> transforms_;
};

// A sequence from a comma-separated list, for command lines:
//   crop=PADDING[:HxW]   flip[=P]   cutout=SIZE[:P]   normalize=MEAN[/MEAN...]:STD[/STD...]
// e.g. "crop=4,flip,normalize=0.4914/0.4822/0.4465:0.2470/0.2435/0.2616". Each random transform
// gets its own stream of `seed`. InvalidArgument naming the item that does not parse.
std::unique_ptr<TransformSequence> parse_augmentation(const std::string& spec, uint64_t seed);

}  // namespace d5
