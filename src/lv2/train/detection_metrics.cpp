#include "deep500/train/detection_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "deep500/core/error.h"
#include "deep500/op/box_coding.h"

namespace d5 {

namespace {

constexpr int kThresholds = 10;

// Indices of `v` by descending score; equal scores keep their order (NumPy's mergesort of -score,
// as pycocotools sorts).
template <typename T>
std::vector<size_t> by_score(const std::vector<T>& v, auto score) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score(v[a]) > score(v[b]); });
  return order;
}

}  // namespace

double box_iou(const Box& a, const Box& b) { return box_coding::iou(a, b); }

std::vector<int64_t> non_max_suppression(const std::vector<Box>& boxes, const std::vector<double>& scores,
                                         double iou_threshold) {
  D5_CHECK_ARG(boxes.size() == scores.size(), "non_max_suppression: {} boxes but {} scores", boxes.size(),
               scores.size());
  std::vector<int64_t> kept;
  for (size_t i : by_score(scores, [](double s) { return s; })) {
    bool keep = true;
    for (int64_t k : kept)
      if (box_iou(boxes[i], boxes[static_cast<size_t>(k)]) > iou_threshold) {
        keep = false;
        break;
      }
    if (keep) kept.push_back(static_cast<int64_t>(i));
  }
  return kept;
}

double average_precision(const std::vector<Detection>& detections, const std::vector<GroundTruth>& truths,
                         double iou_threshold, int64_t max_detections) {
  D5_CHECK_ARG(max_detections >= 1, "max_detections must be at least 1, got {}", max_detections);
  if (truths.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::map<int64_t, std::vector<size_t>> gts_of;  // image -> ground-truth indices
  for (size_t g = 0; g < truths.size(); ++g) gts_of[truths[g].image].push_back(g);
  std::map<int64_t, std::vector<size_t>> dets_of;  // image -> detections, best first, capped
  for (size_t d : by_score(detections, [](const Detection& x) { return x.score; })) {
    D5_CHECK_ARG(std::isfinite(detections[d].score), "detection {} has a non-finite score", d);
    auto& list = dets_of[detections[d].image];
    if (static_cast<int64_t>(list.size()) < max_detections) list.push_back(d);
  }
  // Each kept detection's verdict (true positive or not) and score.
  std::vector<std::pair<double, bool>> ranked;
  for (const auto& [image, dets] : dets_of) {
    const auto it = gts_of.find(image);
    const std::vector<size_t> none;
    const std::vector<size_t>& gts = it == gts_of.end() ? none : it->second;
    std::vector<bool> taken(gts.size(), false);
    for (size_t d : dets) {
      double best = std::min(iou_threshold, 1 - 1e-10);
      int64_t match = -1;
      for (size_t k = 0; k < gts.size(); ++k) {
        if (taken[k]) continue;
        const double iou = box_iou(detections[d].box, truths[gts[k]].box);
        if (iou < best) continue;
        best = iou;
        match = static_cast<int64_t>(k);
      }
      if (match >= 0) taken[static_cast<size_t>(match)] = true;
      ranked.emplace_back(detections[d].score, match >= 0);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<double> recall, precision;
  double tp = 0, fp = 0;
  for (const auto& [score, hit] : ranked) {
    (hit ? tp : fp) += 1;
    recall.push_back(tp / static_cast<double>(truths.size()));
    precision.push_back(tp / (tp + fp));
  }
  for (size_t i = precision.size(); i-- > 1;) precision[i - 1] = std::max(precision[i - 1], precision[i]);
  double sum = 0;
  for (int k = 0; k <= 100; ++k) {
    const double r = k == 100 ? 1.0 : k * 0.01;  // np.linspace(0, 1, 101), element by element
    const auto at = std::lower_bound(recall.begin(), recall.end(), r) - recall.begin();
    if (at < static_cast<std::ptrdiff_t>(precision.size())) sum += precision[static_cast<size_t>(at)];
  }
  return sum / 101.0;
}

MapResult coco_map(const std::vector<Detection>& detections, const std::vector<GroundTruth>& truths,
                   int64_t max_detections) {
  D5_CHECK_ARG(max_detections >= 1, "max_detections must be at least 1, got {}", max_detections);
  MapResult r;
  std::set<int64_t> labels;
  for (const auto& g : truths) labels.insert(g.label);
  r.labels.assign(labels.begin(), labels.end());
  std::vector<double> per_threshold(kThresholds, 0.0);
  for (int64_t label : r.labels) {
    std::vector<Detection> d;
    std::vector<GroundTruth> g;
    for (const auto& x : detections)
      if (x.label == label) d.push_back(x);
    for (const auto& x : truths)
      if (x.label == label) g.push_back(x);
    std::vector<double> aps;
    for (int t = 0; t < kThresholds; ++t) {
      // pycocotools' thresholds: np.linspace(.5, .95, 10), element by element.
      const double iou = t == kThresholds - 1 ? 0.95 : t * ((0.95 - 0.5) / (kThresholds - 1)) + 0.5;
      aps.push_back(average_precision(d, g, iou, max_detections));
      per_threshold[static_cast<size_t>(t)] += aps.back();
    }
    r.ap.push_back(aps);
  }
  if (r.labels.empty()) {
    r.map = r.map50 = r.map75 = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  const double n = static_cast<double>(r.labels.size());
  r.map50 = per_threshold[0] / n;
  r.map75 = per_threshold[5] / n;
  r.map = std::accumulate(per_threshold.begin(), per_threshold.end(), 0.0) / (n * kThresholds);
  return r;
}

}  // namespace d5
