// SsdLoss: the multi-task loss of a single-shot detector (SSD, Liu et al., 2016), a deep500
// operator (ONNX has no detection loss), with the semantics of torchvision's SSD head loss.
// Inputs: prediction [N, A, 4 + K] (f32 or f64: per anchor four box offsets, box_coding.h, then
// scores of K classes, class 0 the background), anchors [A, 4] (x1, y1, x2, y2, each with an
// area), boxes [N, M, 4] (the ground truth, x1, y1, x2, y2) and labels [N, M] (int32 or int64: an
// object's class in [0, K - 1), or ignore_index for a padding row whose box is not read).
// Attributes: match_iou (0.5), negative_ratio (3), ignore_index (-100).
//
// Matching, per image: each anchor takes the object it overlaps most (IoU, the first on ties) when
// that IoU is at least match_iou; then each object claims the anchor that overlaps it most (the
// first on ties, objects in order, a later one winning an anchor two claim), so every object that
// overlaps any anchor has one. A matched anchor a is positive with class t_a = label + 1 and box
// target g_a = encode(object box, anchor); the others are negatives with t_a = 0.
// With s_a the anchor's class scores and d_a its offsets:
//   ce_a = log sum_c exp(s_a[c]) - s_a[t_a],
//   loss = (sum over positives of sum_k smooth_l1(d_a[k] - g_a[k])
//           + sum over positives and hard negatives of ce_a) / max(1, P),
// with smooth_l1(x) = x^2 / 2 for |x| < 1, |x| - 1/2 otherwise, P the positives of the whole batch,
// and an image's hard negatives its negative_ratio x (its positives) negatives of highest ce_a
// (all of them when there are fewer; the lower index first on ties): background everywhere would
// otherwise swamp the few anchors that hold an object.
//
// Gradient (prediction only; matching and the choice of hard negatives are constants of the
// step): for a positive, d loss / d d_a[k] = clamp(d_a[k] - g_a[k], -1, 1) / max(1, P); for a
// counted anchor, d loss / d s_a[c] = (softmax(s_a)[c] - [c = t_a]) / max(1, P); 0 elsewhere.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "deep500/op/box_coding.h"
#include "norm_common.h"

namespace d5::reference {

namespace {

using box_coding::Corners;

int64_t label_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::i64 ? t.data_as<int64_t>()[i] : t.data_as<int32_t>()[i];
}

// What one image's matching decided for each anchor.
struct AnchorTargets {
  std::vector<int64_t> cls;                   // t_a
  std::vector<bool> counted;                  // positive or hard negative
  std::vector<std::array<double, 4>> offset;  // g_a (positives only)
  int64_t positives = 0;
};

class SsdLossOp : public ReferenceOp {
 public:
  explicit SsdLossOp(const OpSpec& s) : ReferenceOp(s, outputs_of(s)) {
    n_ = s.inputs[0].shape[0];
    a_ = s.inputs[0].shape[1];
    k_ = s.inputs[0].shape[2] - 4;
    m_ = s.inputs[2].shape[1];
    match_iou_ = s.attrs.get_float("match_iou", 0.5);
    ratio_ = s.attrs.get_int("negative_ratio", 3);
    ignore_ = s.attrs.get_int("ignore_index", -100);
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const std::vector<AnchorTargets> targets = match_batch<T>(in);
      const T* p = in[0].data_as<T>();
      double sum = 0;
      int64_t positives = 0;
      for (int64_t n = 0; n < n_; ++n) {
        const AnchorTargets& t = targets[static_cast<size_t>(n)];
        positives += t.positives;
        for (int64_t a = 0; a < a_; ++a) {
          const auto i = static_cast<size_t>(a);
          if (!t.counted[i]) continue;
          const T* row = p + (n * a_ + a) * (4 + k_);
          sum += cross_entropy(row + 4, t.cls[i]);
          if (t.cls[i] == 0) continue;
          for (int k = 0; k < 4; ++k) sum += smooth_l1(static_cast<double>(row[k]) - t.offset[i][static_cast<size_t>(k)]);
        }
      }
      out[0].data_as<T>()[0] = static_cast<T>(sum / static_cast<double>(std::max<int64_t>(1, positives)));
    });
  }

  std::vector<bool> differentiable_inputs() const override { return {true, false, false, false}; }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gx[0].defined()) return;
    gx[0].fill(0);
    if (!gy[0].defined()) return;
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const std::vector<AnchorTargets> targets = match_batch<T>(in);
      int64_t positives = 0;
      for (const AnchorTargets& t : targets) positives += t.positives;
      const double up = gy[0].get(0) / static_cast<double>(std::max<int64_t>(1, positives));
      const T* p = in[0].data_as<T>();
      T* d = gx[0].data_as<T>();
      std::vector<double> prob(static_cast<size_t>(k_));
      for (int64_t n = 0; n < n_; ++n) {
        const AnchorTargets& t = targets[static_cast<size_t>(n)];
        for (int64_t a = 0; a < a_; ++a) {
          const auto i = static_cast<size_t>(a);
          if (!t.counted[i]) continue;
          const int64_t at = (n * a_ + a) * (4 + k_);
          softmax(p + at + 4, prob);
          for (int64_t c = 0; c < k_; ++c)
            d[at + 4 + c] = static_cast<T>((prob[static_cast<size_t>(c)] - (c == t.cls[i] ? 1.0 : 0.0)) * up);
          if (t.cls[i] == 0) continue;
          for (int k = 0; k < 4; ++k) {
            const double diff = static_cast<double>(p[at + k]) - t.offset[i][static_cast<size_t>(k)];
            d[at + k] = static_cast<T>(std::clamp(diff, -1.0, 1.0) * up);
          }
        }
      }
    });
  }

  // Per image: the IoU of every anchor with every object (about 12 operations), each anchor's
  // log-sum-exp over the classes (3 per class) and the sort of the negatives (about log2 A
  // comparisons each); backward repeats the matching and forms a softmax per counted anchor.
  double flops() const override { return static_cast<double>(n_) * (match_flops() + 3.0 * a_ * k_); }
  double backward_flops() const override { return static_cast<double>(n_) * (match_flops() + 5.0 * a_ * (k_ + 4)); }

 private:
  double match_flops() const {
    return 12.0 * static_cast<double>(a_ * m_) + static_cast<double>(a_) * std::log2(static_cast<double>(a_) + 1);
  }

  static double smooth_l1(double x) { return std::abs(x) < 1 ? 0.5 * x * x : std::abs(x) - 0.5; }

  template <typename T>
  double cross_entropy(const T* s, int64_t target) const {
    double top = s[0];
    for (int64_t c = 1; c < k_; ++c) top = std::max(top, static_cast<double>(s[c]));
    double z = 0;
    for (int64_t c = 0; c < k_; ++c) z += std::exp(static_cast<double>(s[c]) - top);
    return top + std::log(z) - static_cast<double>(s[target]);
  }

  template <typename T>
  void softmax(const T* s, std::vector<double>& prob) const {
    double top = s[0];
    for (int64_t c = 1; c < k_; ++c) top = std::max(top, static_cast<double>(s[c]));
    double z = 0;
    for (int64_t c = 0; c < k_; ++c) z += prob[static_cast<size_t>(c)] = std::exp(static_cast<double>(s[c]) - top);
    for (double& v : prob) v /= z;
  }

  template <typename T>
  static Corners corners(const T* b) {
    return {static_cast<double>(b[0]), static_cast<double>(b[1]), static_cast<double>(b[2]), static_cast<double>(b[3])};
  }

  template <typename T>
  std::vector<AnchorTargets> match_batch(std::span<const Tensor> in) const {
    std::vector<Corners> anchors(static_cast<size_t>(a_));
    for (int64_t a = 0; a < a_; ++a) {
      anchors[static_cast<size_t>(a)] = corners(in[1].data_as<T>() + a * 4);
      D5_CHECK_ARG(box_coding::area(anchors[static_cast<size_t>(a)]) > 0, "{}: anchor {} ({}, {}, {}, {}) has no area",
                   spec_.label(), a, anchors[static_cast<size_t>(a)][0], anchors[static_cast<size_t>(a)][1],
                   anchors[static_cast<size_t>(a)][2], anchors[static_cast<size_t>(a)][3]);
    }
    std::vector<AnchorTargets> out;
    out.reserve(static_cast<size_t>(n_));
    for (int64_t n = 0; n < n_; ++n) out.push_back(match_image<T>(in, anchors, n));
    return out;
  }

  // The objects of image n (rows not labelled ignore_index), checked.
  template <typename T>
  void read_objects(std::span<const Tensor> in, int64_t n, std::vector<Corners>& boxes,
                    std::vector<int64_t>& labels) const {
    for (int64_t m = 0; m < m_; ++m) {
      const int64_t label = label_at(in[3], n * m_ + m);
      if (label == ignore_) continue;
      D5_CHECK_ARG(label >= 0 && label < k_ - 1,
                   "{}: labels[{}, {}] = {} is neither an object class in [0, {}) (the prediction scores {} "
                   "classes, the background first) nor ignore_index ({})",
                   spec_.label(), n, m, label, k_ - 1, k_, ignore_);
      const Corners b = corners(in[2].data_as<T>() + (n * m_ + m) * 4);
      D5_CHECK_ARG(box_coding::area(b) > 0 && std::isfinite(b[0] + b[1] + b[2] + b[3]),
                   "{}: boxes[{}, {}] = ({}, {}, {}, {}) has no area; a box is x1, y1, x2, y2 with x1 < x2 and "
                   "y1 < y2",
                   spec_.label(), n, m, b[0], b[1], b[2], b[3]);
      boxes.push_back(b);
      labels.push_back(label);
    }
  }

  template <typename T>
  AnchorTargets match_image(std::span<const Tensor> in, const std::vector<Corners>& anchors, int64_t n) const {
    std::vector<Corners> boxes;
    std::vector<int64_t> labels;
    read_objects<T>(in, n, boxes, labels);
    const size_t na = anchors.size(), nb = boxes.size();
    std::vector<int64_t> match(na, -1);
    std::vector<double> iou(na * nb);
    for (size_t a = 0; a < na; ++a) {
      double best = -1;
      for (size_t b = 0; b < nb; ++b) {
        iou[a * nb + b] = box_coding::iou(anchors[a], boxes[b]);
        if (iou[a * nb + b] > best) {
          best = iou[a * nb + b];
          if (best >= match_iou_) match[a] = static_cast<int64_t>(b);
        }
      }
    }
    for (size_t b = 0; b < nb; ++b) {
      size_t best = 0;
      for (size_t a = 1; a < na; ++a)
        if (iou[a * nb + b] > iou[best * nb + b]) best = a;
      if (iou[best * nb + b] > 0) match[best] = static_cast<int64_t>(b);
    }

    AnchorTargets t{std::vector<int64_t>(na, 0), std::vector<bool>(na, false),
                    std::vector<std::array<double, 4>>(na), 0};
    std::vector<int64_t> negatives;
    for (size_t a = 0; a < na; ++a) {
      if (match[a] < 0) {
        negatives.push_back(static_cast<int64_t>(a));
        continue;
      }
      const auto b = static_cast<size_t>(match[a]);
      t.cls[a] = labels[b] + 1;
      t.counted[a] = true;
      t.offset[a] = box_coding::encode(boxes[b], anchors[a]);
      ++t.positives;
    }
    const auto hard = static_cast<size_t>(std::min<int64_t>(ratio_ * t.positives, static_cast<int64_t>(negatives.size())));
    if (hard > 0) {
      const T* p = in[0].data_as<T>() + n * a_ * (4 + k_);
      std::vector<double> loss(na);
      for (int64_t a : negatives) loss[static_cast<size_t>(a)] = cross_entropy(p + a * (4 + k_) + 4, 0);
      std::partial_sort(negatives.begin(), negatives.begin() + static_cast<std::ptrdiff_t>(hard), negatives.end(),
                        [&](int64_t x, int64_t y) {
                          const double lx = loss[static_cast<size_t>(x)], ly = loss[static_cast<size_t>(y)];
                          return lx > ly || (lx == ly && x < y);
                        });
      for (size_t i = 0; i < hard; ++i) t.counted[static_cast<size_t>(negatives[i])] = true;
    }
    return t;
  }

  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() == 4 && s.has_input(0) && s.has_input(1) && s.has_input(2) && s.has_input(3),
                 "{}: needs 4 inputs (prediction, anchors, boxes, labels), got {}", s.label(), s.inputs.size());
    const TensorDesc& p = s.inputs[0];
    dispatch_float(p.dtype, s, []<typename T>() {});
    D5_CHECK_ARG(p.shape.rank() == 3 && p.shape[2] >= 6,
                 "{}: prediction must be [N, A, 4 + K] (4 box offsets, then K >= 2 class scores with the background "
                 "first), got {}",
                 s.label(), p.shape.to_string());
    const int64_t n = p.shape[0], a = p.shape[1];
    D5_CHECK_ARG(s.inputs[1].dtype == p.dtype && s.inputs[1].shape == Shape({a, 4}),
                 "{}: anchors must be {} [{}, 4] (one box per anchor of the prediction), got {}", s.label(),
                 to_string(p.dtype), a, s.inputs[1].to_string());
    const TensorDesc& boxes = s.inputs[2];
    D5_CHECK_ARG(boxes.dtype == p.dtype && boxes.shape.rank() == 3 && boxes.shape[0] == n && boxes.shape[2] == 4,
                 "{}: boxes must be {} [{}, M, 4] (M objects per image at most), got {}", s.label(), to_string(p.dtype),
                 n, boxes.to_string());
    const TensorDesc& labels = s.inputs[3];
    D5_CHECK_ARG((labels.dtype == DType::i64 || labels.dtype == DType::i32) &&
                     labels.shape == Shape({n, boxes.shape[1]}),
                 "{}: labels must be int32 or int64 [{}, {}] (one per box), got {}", s.label(), n, boxes.shape[1],
                 labels.to_string());
    D5_CHECK_ARG(s.attrs.get_int("negative_ratio", 3) >= 0, "{}: negative_ratio must be >= 0, got {}", s.label(),
                 s.attrs.get_int("negative_ratio", 3));
    const double match_iou = s.attrs.get_float("match_iou", 0.5);
    D5_CHECK_ARG(match_iou > 0 && match_iou <= 1, "{}: match_iou must be in (0, 1], got {}", s.label(), match_iou);
    return {TensorDesc{p.dtype, Shape{}}};
  }

  int64_t n_ = 0, a_ = 0, k_ = 0, m_ = 0, ratio_ = 3, ignore_ = -100;
  double match_iou_ = 0.5;
};

}  // namespace

void register_ssd_loss_ops(OpRegistry& r) { add_op(r, "SsdLoss", true, make<SsdLossOp>); }

}  // namespace d5::reference
