#pragma once
// Single-shot detection's box coding (docs/detection.md#box-coding): a predicted box is four
// offsets from an anchor (a prior box), as in SSD (Liu et al., 2016) and torchvision's
// BoxCoder(weights=(10, 10, 5, 5)). With the anchor's centre (ax, ay), width aw and height ah
// and the box's cx, cy, w, h:
//   encode: dx = 10 (cx - ax) / aw,  dy = 10 (cy - ay) / ah,  dw = 5 log(w / aw),  dh = 5 log(h / ah);
//   decode: cx = ax + aw dx / 10, cy = ay + ah dy / 10, w = aw exp(dw / 5), h = ah exp(dh / 5),
// with dw / 5 and dh / 5 clamped at log(1000 / 16) before exp (torchvision's bound), so an
// untrained network cannot overflow a box. The weights scale the offsets of a matched anchor to
// about unit size, which the smooth-L1 loss assumes. Boxes are x1, y1, x2, y2.
//
// Shared by the SsdLoss operator (targets) and the map measures (decoding predictions).
#include <algorithm>
#include <array>
#include <cmath>

namespace d5::box_coding {

using Corners = std::array<double, 4>;  // x1, y1, x2, y2

inline constexpr double kCentreWeight = 10;
inline constexpr double kSizeWeight = 5;
inline const double kMaxLogScale = std::log(1000.0 / 16.0);

inline double area(const Corners& b) { return std::max(0.0, b[2] - b[0]) * std::max(0.0, b[3] - b[1]); }

// Intersection over union; 0 when either box has no area.
inline double iou(const Corners& a, const Corners& b) {
  const double w = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  const double h = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  if (w <= 0 || h <= 0) return 0;
  const double inter = w * h;
  const double uni = area(a) + area(b) - inter;
  return uni > 0 ? inter / uni : 0;
}

// The offsets that decode to `box` from `anchor`; both must have an area (the caller checks).
inline std::array<double, 4> encode(const Corners& box, const Corners& anchor) {
  const double aw = anchor[2] - anchor[0], ah = anchor[3] - anchor[1];
  const double w = box[2] - box[0], h = box[3] - box[1];
  return {kCentreWeight * ((box[0] + box[2]) / 2 - (anchor[0] + anchor[2]) / 2) / aw,
          kCentreWeight * ((box[1] + box[3]) / 2 - (anchor[1] + anchor[3]) / 2) / ah,
          kSizeWeight * std::log(w / aw), kSizeWeight * std::log(h / ah)};
}

inline Corners decode(const std::array<double, 4>& d, const Corners& anchor) {
  const double aw = anchor[2] - anchor[0], ah = anchor[3] - anchor[1];
  const double cx = (anchor[0] + anchor[2]) / 2 + aw * d[0] / kCentreWeight;
  const double cy = (anchor[1] + anchor[3]) / 2 + ah * d[1] / kCentreWeight;
  const double w = aw * std::exp(std::min(d[2] / kSizeWeight, kMaxLogScale));
  const double h = ah * std::exp(std::min(d[3] / kSizeWeight, kMaxLogScale));
  return {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2};
}

}  // namespace d5::box_coding
