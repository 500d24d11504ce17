// NonMaxSuppression (ONNX opset 10; 11 is the same operator): greedy selection of boxes for each
// image b and class c of boxes [N, S, 4] and scores [N, C, S], as ONNX's reference implementation
// (onnx.reference, a port of ONNX Runtime's kernel) selects them:
//   candidates: the boxes of image b whose score[b, c, i] > score_threshold (every box when
//     score_threshold is absent), best first; equal scores keep input order (the lower box index
//     first); a NaN score is never a candidate (it cannot be ranked).
//   each candidate in turn is selected unless IoU(candidate, a box already selected for (b, c))
//     > iou_threshold (absent: 0, so any overlap suppresses), until max_output_boxes_per_class
//     boxes are selected.
// Boxes: center_point_box=0 (the default) [y1, x1, y2, x2], any diagonal pair of corners (each
// pair of coordinates is ordered first, so a flipped box is the same box); 1: [x_center,
// y_center, width, height]. IoU = intersection / (area1 + area2 - intersection), computed in the
// boxes' dtype as ONNX Runtime does, so results at the threshold agree with it; boxes that do not
// overlap, and boxes of zero or negative area, never suppress.
// selected_indices: int64 rows (batch, class, box), by image, then class, then selection order.
//
// Its length depends on the values, but d5 infers shapes before execution, so the output has a
// static bound instead: [N * C * min(max_output_boxes_per_class, S), 3], the most any scores can
// select, with the real rows first and -1 in every element of the rows past them (OpTraits'
// padded_outputs, op_traits.h; a reader keeps the rows before the first -1). Requiring boxes and
// scores to be known at creation, as Range does its bounds, would make a detector's NMS (whose
// boxes come from the network) impossible. The bound needs max_output_boxes_per_class when the
// operator is created; it is refused otherwise, and a run whose value differs is refused. Absent
// or 0 selects nothing ([0, 3]). A negative value, which ONNX leaves undefined (ONNX Runtime
// reads it as 0), is refused, as is an iou_threshold outside ONNX's range [0, 1].
// No gradient: the output is integer indices.
#include <algorithm>
#include <cmath>

#include "deep500/op/op_traits.h"
#include "movement_common.h"

namespace d5::reference {

namespace {

// A box as intervals [x0, x1] x [y0, y1] (x0 > x1 only for a center box of negative width).
template <typename T>
struct Extent {
  T x0, x1, y0, y1;
};

template <typename T>
Extent<T> extent_of(const T* b, bool center) {
  if (center) {
    const T hw = b[2] / 2, hh = b[3] / 2;
    return {b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh};
  }
  return {std::min(b[1], b[3]), std::max(b[1], b[3]), std::min(b[0], b[2]), std::max(b[0], b[2])};
}

// A run's thresholds in the boxes' dtype; has_score false: score_threshold is absent.
template <typename T>
struct Thresholds {
  bool has_score;
  T score, iou;
};

// IoU(a, b) > threshold, in ONNX Runtime's order of operations.
template <typename T>
bool suppresses(const Extent<T>& a, const Extent<T>& b, T threshold) {
  const T ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
  if (ix1 <= ix0) return false;
  const T iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
  if (iy1 <= iy0) return false;
  const T inter = (ix1 - ix0) * (iy1 - iy0);
  const T area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  const T uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

// A threshold input (a float scalar or [1]) at run time, or `fallback` when absent.
double threshold_of(std::span<const Tensor> in, const OpSpec& spec, size_t i, double fallback) {
  return spec.has_input(i) ? in[i].get(0) : fallback;
}

class NonMaxSuppressionOp : public ReferenceOp {
 public:
  NonMaxSuppressionOp(const OpSpec& s, int64_t max_per_class)
      : ReferenceOp(s, outputs_of(s, max_per_class)), max_per_class_(max_per_class) {
    n_ = s.inputs[0].shape[0];
    boxes_ = s.inputs[0].shape[1];
    classes_ = s.inputs[1].shape[1];
    center_ = s.attrs.get_int("center_point_box", 0) == 1;
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (spec_.has_input(2)) {
      const int64_t k = int_values(in[2], spec_, "max_output_boxes_per_class")[0];
      D5_CHECK_ARG(k == max_per_class_,
                   "{}: max_output_boxes_per_class is {} at run time, but the operator was created for {} (it "
                   "decides the output's bound)",
                   spec_.label(), k, max_per_class_);
    }
    const double iou = threshold_of(in, spec_, 3, 0.0);
    check_iou_threshold(iou, spec_);
    int64_t* rows = out[0].data_as<int64_t>();
    int64_t written = 0;
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* boxes = in[0].data_as<T>();
      const T* scores = in[1].data_as<T>();
      const Thresholds<T> th{spec_.has_input(4), static_cast<T>(threshold_of(in, spec_, 4, 0.0)), static_cast<T>(iou)};
      std::vector<Extent<T>> extents(static_cast<size_t>(boxes_));
      for (int64_t b = 0; b < n_; ++b) {
        for (int64_t i = 0; i < boxes_; ++i)
          extents[static_cast<size_t>(i)] = extent_of(boxes + (b * boxes_ + i) * 4, center_);
        for (int64_t c = 0; c < classes_; ++c)
          for (int64_t box : select(scores + (b * classes_ + c) * boxes_, th, extents)) {
            rows[written * 3] = b;
            rows[written * 3 + 1] = c;
            rows[written * 3 + 2] = box;
            ++written;
          }
      }
    });
    std::fill(rows + written * 3, rows + out[0].numel(), kPaddingValue);
  }

  std::string no_gradient_reason() const override {
    return "NonMaxSuppression outputs integer indices of the selected boxes: no gradient";
  }

  double flops() const override {
    // The worst case: a sort of each (image, class)'s scores, and every candidate tested against
    // each of the up to k selected boxes (about 15 operations an IoU).
    const double s = static_cast<double>(boxes_), k = static_cast<double>(std::min(max_per_class_, boxes_));
    return static_cast<double>(n_ * classes_) * (s * std::log2(std::max(2.0, s)) + 15 * s * k);
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s, int64_t max_per_class) {
    const TensorDesc &boxes = s.inputs[0], &scores = s.inputs[1];
    dispatch_float(boxes.dtype, s, []<typename T>() {});
    D5_CHECK_ARG(boxes.shape.rank() == 3 && boxes.shape[2] == 4,
                 "{}: boxes must be [num_batches, spatial_dimension, 4], got {}", s.label(), boxes.shape.to_string());
    D5_CHECK_ARG(scores.dtype == boxes.dtype && scores.shape.rank() == 3 && scores.shape[0] == boxes.shape[0] &&
                     scores.shape[2] == boxes.shape[1],
                 "{}: scores must be [num_batches, num_classes, spatial_dimension] = [{}, C, {}] of the boxes' "
                 "dtype {}, got {}",
                 s.label(), boxes.shape[0], boxes.shape[1], to_string(boxes.dtype), scores.to_string());
    for (size_t i : {size_t{3}, size_t{4}}) {
      if (!s.has_input(i)) continue;
      D5_CHECK_ARG(is_floating(s.inputs[i].dtype) && s.inputs[i].shape.rank() <= 1 && s.inputs[i].numel() == 1,
                   "{}: {} must be one floating-point value (a scalar or [1]), got {}", s.label(),
                   i == 3 ? "iou_threshold" : "score_threshold", s.inputs[i].to_string());
    }
    if (const Tensor* iou = s.has_input(3) ? s.value(3) : nullptr) check_iou_threshold(iou->get(0), s);
    const int64_t center = s.attrs.get_int("center_point_box", 0);
    D5_CHECK_ARG(center == 0 || center == 1,
                 "{}: center_point_box={} is neither 0 ([y1, x1, y2, x2]) nor 1 ([x_center, y_center, width, "
                 "height])",
                 s.label(), center);
    const int64_t per_class = std::min(max_per_class, boxes.shape[1]);
    return {TensorDesc{DType::i64, Shape{product({boxes.shape[0], scores.shape[1], per_class}, 0, 3), 3}}};
  }

  static void check_iou_threshold(double iou, const OpSpec& s) {
    D5_CHECK_ARG(iou >= 0 && iou <= 1, "{}: iou_threshold {} is outside [0, 1]", s.label(), iou);
  }

  // The boxes selected for one (image, class), in selection order.
  template <typename T>
  std::vector<int64_t> select(const T* scores, const Thresholds<T>& th, const std::vector<Extent<T>>& extents) const {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < boxes_; ++i)
      if (!std::isnan(scores[i]) && (!th.has_score || scores[i] > th.score)) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
    std::vector<int64_t> kept;
    for (int64_t i : order) {
      if (static_cast<int64_t>(kept.size()) == max_per_class_) break;
      const bool free = std::none_of(kept.begin(), kept.end(), [&](int64_t k) {
        return suppresses(extents[static_cast<size_t>(k)], extents[static_cast<size_t>(i)], th.iou);
      });
      if (free) kept.push_back(i);
    }
    return kept;
  }

  int64_t max_per_class_ = 0, n_ = 0, boxes_ = 0, classes_ = 0;
  bool center_ = false;
};

// max_output_boxes_per_class, which decides the output's bound: 0 when absent.
int64_t max_per_class_of(const OpSpec& spec) {
  check_input_count(spec, 2, 5);
  D5_CHECK_ARG(spec.has_input(1), "{}: input 1 (scores) is required", spec.label());
  if (!spec.has_input(2)) return 0;
  const Tensor* t = spec.value(2);
  D5_CHECK_ARG(t != nullptr,
               "{}: input 2 (max_output_boxes_per_class) must be a constant known when the operator is created: "
               "d5 gives selected_indices a static bound of num_batches * num_classes * "
               "min(max_output_boxes_per_class, spatial_dimension) rows, padded with -1",
               spec.label());
  const std::vector<int64_t> k = int_values(*t, spec, "max_output_boxes_per_class");
  D5_CHECK_ARG(k.size() == 1, "{}: max_output_boxes_per_class must hold one value, it holds {}", spec.label(),
               k.size());
  D5_CHECK_ARG(k[0] >= 0, "{}: max_output_boxes_per_class is {}; it must be >= 0 (0 selects nothing)", spec.label(),
               k[0]);
  return k[0];
}

}  // namespace

void register_non_max_suppression_ops(OpRegistry& r) {
  add_op(r, "NonMaxSuppression", false, [](const OpSpec& s) -> OpCreateResult {
    return std::make_unique<NonMaxSuppressionOp>(s, max_per_class_of(s));
  });
}

}  // namespace d5::reference
