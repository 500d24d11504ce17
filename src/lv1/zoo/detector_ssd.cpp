// A small single-shot detector (SSD, Liu et al., 2016) for grey scenes of handwritten digits
// (mnist-scenes: 64 x 64 canvases, digits 10-20 pixels tall): a five-convolution backbone with
// batch norm and ReLU (3x3; strides 1, 2, 2, 1, 2) and one 3x3 prediction convolution on each of
// two feature maps, the fourth convolution's (stride 4: 16 x 16 at the default) and the fifth's
// (stride 8: 8 x 8). Each map position has four anchors centred on it: heights 11 and 15 pixels on
// the first map, 19 and 25 on the second, each with width/height 0.35 (a "1") and 0.75 (the other
// digits), which MNIST's ink boxes span. A prediction convolution writes, per anchor, four box
// offsets (box_coding.h) and the scores of the background and each class, so the model's output is
// [batch, anchors, 4 + classes + 1] with anchors ordered by map, row, column, then anchor; the
// anchors themselves are the network's constant "anchors" (x1, y1, x2, y2 in input pixels).
//
// Convolutions before batch norm have no bias (its shift makes one redundant). 166,632 parameters
// at the default (10 classes): convolutions 1x16x9 = 144, 16x32x9 = 4,608, 32x64x9 = 18,432, and
// 64x64x9 = 36,864 twice, batch norms 2 x (16 + 32 + 64 + 64 + 64) = 480, the two prediction
// convolutions 64 x 60 x 9 + 60 = 34,620 each.
#include <algorithm>
#include <array>

#include "zoo_builder.h"

namespace d5::zoo {

namespace {

struct AnchorShape {
  double height, aspect;  // aspect = width / height
};

constexpr std::array<AnchorShape, 4> kFineAnchors = {{{11, 0.35}, {11, 0.75}, {15, 0.35}, {15, 0.75}}};
constexpr std::array<AnchorShape, 4> kCoarseAnchors = {{{19, 0.35}, {19, 0.75}, {25, 0.35}, {25, 0.75}}};

Value conv_bn_relu(Builder& b, const Value& x, int index, int64_t channels, int64_t stride) {
  const std::string i = std::to_string(index);
  return b.relu(b.batch_norm(b.conv(x, "backbone.conv" + i, channels, 3, stride, 1, false), "backbone.bn" + i),
                "backbone.relu" + i);
}

// The prediction convolution on one map, its channels (anchor-major: anchor a's values at a D
// + d) laid out as [batch, rows x columns x anchors, D].
Value predict(Builder& b, const Value& x, const std::string& scope, int64_t anchors, int64_t per_anchor) {
  const Value y = b.conv(x, scope, anchors * per_anchor, 3, 1, 1, true);
  const int64_t n = y.shape[0], h = y.shape[2], w = y.shape[3];
  const Value split = b.node("Reshape", scope + ".split", {y.name, b.int64s({n, anchors, per_anchor, h, w}).name},
                             Shape{n, anchors, per_anchor, h, w});
  const Value last = b.node("Transpose", scope + ".channels_last", {split.name}, Shape{n, h, w, anchors, per_anchor},
                            Attributes{{"perm", std::vector<int64_t>{0, 3, 4, 1, 2}}});
  return b.node("Reshape", scope + ".flatten", {last.name, b.int64s({n, h * w * anchors, per_anchor}).name},
                Shape{n, h * w * anchors, per_anchor});
}

// The anchors of one map of h x w positions over an input of in_h x in_w pixels, in predict()'s
// order, appended to `out` (x1, y1, x2, y2).
void add_anchors(std::vector<float>& out, int64_t h, int64_t w, int64_t in_h, int64_t in_w,
                 const std::array<AnchorShape, 4>& shapes) {
  const double sy = static_cast<double>(in_h) / static_cast<double>(h);
  const double sx = static_cast<double>(in_w) / static_cast<double>(w);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const double cy = (static_cast<double>(y) + 0.5) * sy, cx = (static_cast<double>(x) + 0.5) * sx;
      for (const AnchorShape& s : shapes) {
        const double half_h = s.height / 2, half_w = s.height * s.aspect / 2;
        for (double v : {cx - half_w, cy - half_h, cx + half_w, cy + half_h}) out.push_back(static_cast<float>(v));
      }
    }
  }
}

}  // namespace

Network build_detector_ssd(const ModelOptions& o) {
  Builder b("detector-ssd", o);
  Value x = b.input(3, "C,H,W");
  const int64_t in_h = x.shape[2], in_w = x.shape[3];
  x = conv_bn_relu(b, x, 1, 16, 1);
  x = conv_bn_relu(b, x, 2, 32, 2);
  x = conv_bn_relu(b, x, 3, 64, 2);
  const Value fine = conv_bn_relu(b, x, 4, 64, 1);
  const Value coarse = conv_bn_relu(b, fine, 5, 64, 2);
  const int64_t per_anchor = 4 + o.classes + 1;
  const Value p1 = predict(b, fine, "head.fine", kFineAnchors.size(), per_anchor);
  const Value p2 = predict(b, coarse, "head.coarse", kCoarseAnchors.size(), per_anchor);
  const int64_t anchors = p1.shape[1] + p2.shape[1];
  const Value prediction = b.node("Concat", "head.concat", {p1.name, p2.name},
                                  Shape{o.batch, anchors, per_anchor}, Attributes{{"axis", int64_t{1}}});
  std::vector<float> boxes;
  add_anchors(boxes, fine.shape[2], fine.shape[3], in_h, in_w, kFineAnchors);
  add_anchors(boxes, coarse.shape[2], coarse.shape[3], in_h, in_w, kCoarseAnchors);
  Tensor anchor_boxes(DType::f32, Shape{anchors, 4});
  std::copy(boxes.begin(), boxes.end(), anchor_boxes.data_as<float>());
  return b.finish_ssd(prediction, anchor_boxes);
}

}  // namespace d5::zoo
