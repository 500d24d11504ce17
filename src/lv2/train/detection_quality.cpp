// The detection measures: a test pass's predictions decoded into detections (decode_ssd), the
// batch's labels and boxes into ground truth, and COCO's mAP over the whole pass (coco_map).
#include "detection_quality.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "deep500/core/error.h"
#include "deep500/op/box_coding.h"
#include "deep500/train/detection_metrics.h"

namespace d5 {

namespace {

void check_ssd_layout(const Tensor& prediction, const Tensor& anchors) {
  const Shape& p = prediction.shape();
  D5_CHECK_ARG(prediction.on_host() && prediction.dtype() == DType::f32 && p.rank() == 3 && p[2] >= 6,
               "a detector's prediction must be host f32 [batch, anchors, 4 + classes] (box offsets, then class "
               "scores with the background first), got {}",
               prediction.desc().to_string());
  D5_CHECK_ARG(anchors.defined() && anchors.on_host() && anchors.dtype() == DType::f32 &&
                   anchors.shape() == Shape({p[1], 4}),
               "decoding a prediction of {} anchors needs anchors f32 [{}, 4] (the detector's constant 'anchors'), "
               "got {}",
               p[1], p[1], anchors.defined() ? anchors.desc().to_string() : std::string("none"));
}

// Image `row`'s detections: per class the candidates above the threshold, best first, capped and
// reduced by NMS; then the best of all classes, capped.
std::vector<Detection> decode_image(const float* p, const float* anchors, int64_t a_count, int64_t k,
                                    int64_t image, const SsdDecoding& o) {
  std::vector<box_coding::Corners> boxes(static_cast<size_t>(a_count));
  std::vector<double> prob(static_cast<size_t>(a_count * k));
  for (int64_t a = 0; a < a_count; ++a) {
    const float* row = p + a * (4 + k);
    const float* an = anchors + a * 4;
    boxes[static_cast<size_t>(a)] = box_coding::decode({row[0], row[1], row[2], row[3]}, {an[0], an[1], an[2], an[3]});
    const double top = *std::max_element(row + 4, row + 4 + k);
    double z = 0;
    double* pr = prob.data() + a * k;
    for (int64_t c = 0; c < k; ++c) z += pr[c] = std::exp(static_cast<double>(row[4 + c]) - top);
    for (int64_t c = 0; c < k; ++c) pr[c] /= z;
  }
  std::vector<Detection> out;
  for (int64_t c = 1; c < k; ++c) {
    std::vector<int64_t> candidates;
    for (int64_t a = 0; a < a_count; ++a)
      if (prob[static_cast<size_t>(a * k + c)] > o.score_threshold) candidates.push_back(a);
    const auto score = [&](int64_t a) { return prob[static_cast<size_t>(a * k + c)]; };
    std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t x, int64_t y) { return score(x) > score(y); });
    if (static_cast<int64_t>(candidates.size()) > o.candidates_per_class)
      candidates.resize(static_cast<size_t>(o.candidates_per_class));
    std::vector<Box> cb;
    std::vector<double> cs;
    for (int64_t a : candidates) {
      cb.push_back(boxes[static_cast<size_t>(a)]);
      cs.push_back(score(a));
    }
    for (int64_t kept : non_max_suppression(cb, cs, o.nms_iou))
      out.push_back({image, c - 1, cs[static_cast<size_t>(kept)], cb[static_cast<size_t>(kept)]});
  }
  std::stable_sort(out.begin(), out.end(), [](const Detection& x, const Detection& y) { return x.score > y.score; });
  if (static_cast<int64_t>(out.size()) > o.max_detections) out.resize(static_cast<size_t>(o.max_detections));
  return out;
}

// Keeps a pass's detections and ground truth; value() is one of coco_map's means.
class DetectionMap : public QualityMeasure {
 public:
  DetectionMap(std::string name, const QualitySettings& s)
      : name_(std::move(name)), ignore_(s.ignore_index), anchors_(s.anchors) {}

  std::string name() const override { return name_; }
  std::string unit() const override { return "fraction"; }
  bool higher_is_better() const override { return true; }
  double lowest() const override { return 0; }
  double highest() const override { return 1; }
  void reset() override {
    detections_.clear();
    truths_.clear();
    images_ = 0;
  }

  void observe(const Tensor&, const Tensor&, int64_t) override {
    D5_THROW(InvalidArgument, "{} reads the objects' boxes beside their labels: observe it with the whole batch "
             "(observe_batch)", name_);
  }

  void observe_batch(const Tensor& prediction, const std::map<std::string, Tensor>& batch, int64_t rows) override {
    check_ssd_layout(prediction, anchors_);
    const auto labels = batch.find("labels"), boxes = batch.find("boxes");
    D5_CHECK_ARG(labels != batch.end() && boxes != batch.end(),
                 "{}: the batch needs 'labels' [N, M] and 'boxes' [N, M, 4] (a detection dataset's)", name_);
    const Tensor& l = labels->second;
    const Tensor& b = boxes->second;
    D5_CHECK_ARG(l.on_host() && l.dtype() == DType::i64 && l.shape().rank() == 2 && b.on_host() &&
                     b.dtype() == DType::f32 && b.shape() == Shape({l.shape()[0], l.shape()[1], 4}) &&
                     rows >= 0 && rows <= std::min(l.shape()[0], prediction.shape()[0]),
                 "{}: labels must be host i64 [N, M] and boxes f32 [N, M, 4] with at least {} rows, got {} and {}",
                 name_, rows, l.desc().to_string(), b.desc().to_string());
    const int64_t m = l.shape()[1];
    const auto* lv = l.data_as<int64_t>();
    const auto* bv = b.data_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < m; ++j) {
        const int64_t label = lv[r * m + j];
        if (label == ignore_) continue;
        const float* x = bv + (r * m + j) * 4;
        truths_.push_back({images_ + r, label, {x[0], x[1], x[2], x[3]}});
      }
    }
    const std::vector<Detection> found = decode_ssd(prediction, anchors_, rows, images_);
    detections_.insert(detections_.end(), found.begin(), found.end());
    images_ += rows;
  }

  double value() const override {
    if (truths_.empty()) return std::numeric_limits<double>::quiet_NaN();
    const MapResult r = coco_map(detections_, truths_);
    return name_ == "map50" ? r.map50 : name_ == "map75" ? r.map75 : r.map;
  }

 private:
  std::string name_;
  int64_t ignore_;
  Tensor anchors_;
  std::vector<Detection> detections_;
  std::vector<GroundTruth> truths_;
  int64_t images_ = 0;
};

}  // namespace

std::vector<Detection> decode_ssd(const Tensor& prediction, const Tensor& anchors, int64_t rows, int64_t first_image,
                                  const SsdDecoding& options) {
  check_ssd_layout(prediction, anchors);
  const Shape& p = prediction.shape();
  D5_CHECK_ARG(rows >= 0 && rows <= p[0], "{} rows decoded of a prediction of {}", rows, p[0]);
  const int64_t a_count = p[1], k = p[2] - 4;
  std::vector<Detection> out;
  for (int64_t r = 0; r < rows; ++r) {
    const auto image = decode_image(prediction.data_as<float>() + r * a_count * (4 + k), anchors.data_as<float>(),
                                    a_count, k, first_image + r, options);
    out.insert(out.end(), image.begin(), image.end());
  }
  return out;
}

std::unique_ptr<QualityMeasure> make_detection_measure(const std::string& name, const QualitySettings& settings) {
  return std::make_unique<DetectionMap>(name, settings);
}

}  // namespace d5
