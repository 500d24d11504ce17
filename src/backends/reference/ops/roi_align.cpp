// RoiAlign (opset 10; 16 adds coordinate_transformation_mode): for each region of interest r,
// pooled features [C, output_height, output_width] of image batch_indices[r] of X [N, C, H, W].
// The box (x1, y1, x2, y2) = rois[r] * spatial_scale, shifted by -0.5 under half_pixel (the
// default since 16; output_half_pixel, opset 10's behaviour, shifts nothing and widens boxes
// narrower than 1 to 1), is cut into output_height x output_width bins; each bin averages (mode
// avg) grid_h x grid_w bilinear samples at the centres of a regular sub-grid, with grid = 
// sampling_ratio, or ceil(box extent / output extent) when it is 0. A sample (y, x) outside
// [-1, H] x [-1, W] is 0; otherwise y, x are clamped to >= 0, and to the last row/column when
// past it, and it reads
//   (1-ly)(1-lx) v[y0,x0] + (1-ly) lx v[y0,x1] + ly (1-lx) v[y1,x0] + ly lx v[y1,x1]
// with y0 = floor(y), y1 = y0 + 1, ly = y - y0 (the same for x). Mode max takes, as ONNX Runtime
// and ONNX's reference do, the largest of the four weighted corners over every sample of the bin
// (not the largest interpolated sample). Gradient (X only): each sample's weights, divided by
// the sample count (avg), or the winning weighted corner (max), scattered back.
#include <cmath>

#include "movement_common.h"

namespace d5::reference {

namespace {

struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};  // offsets in one H x W plane
  double w[4] = {0, 0, 0, 0};
};

class RoiAlignOp : public ReferenceOp {
 public:
  explicit RoiAlignOp(const OpSpec& s) : ReferenceOp(s, outputs_of(s)) {
    const Shape& x = s.inputs[0].shape;
    n_ = x[0];
    c_ = x[1];
    h_ = x[2];
    w_ = x[3];
    rois_ = s.inputs[1].shape[0];
    oh_ = s.attrs.get_int("output_height", 1);
    ow_ = s.attrs.get_int("output_width", 1);
    sampling_ = s.attrs.get_int("sampling_ratio", 0);
    scale_ = s.attrs.get_float("spatial_scale", 1.0);
    max_ = s.attrs.get_string("mode", "avg") == "max";
    half_pixel_ = s.opset >= 16 && s.attrs.get_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  }

  std::vector<bool> differentiable_inputs() const override { return {true, false, false}; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    plan(in[1], in[2]);
    dispatch_all_floats(in[0].dtype(), spec_, [&]<typename T>() {
      const T* x = in[0].data_as<T>();
      std::vector<double> y(static_cast<size_t>(out[0].numel()));
      winners_.assign(y.size(), {-1, -1});
      for (int64_t r = 0; r < rois_; ++r)
        for (int64_t c = 0; c < c_; ++c) {
          const T* plane = x + (batch_[static_cast<size_t>(r)] * c_ + c) * h_ * w_;
          for (int64_t b = 0; b < oh_ * ow_; ++b) {
            const auto& samples = bins_[static_cast<size_t>(r * oh_ * ow_ + b)];
            const size_t o = static_cast<size_t>((r * c_ + c) * oh_ * ow_ + b);
            double acc = 0;
            bool any = false;
            for (size_t s = 0; s < samples.size(); ++s)
              for (int k = 0; k < 4; ++k) {
                const double v = samples[s].w[k] * to_double(plane[samples[s].pos[k]]);
                if (!max_) acc += v;
                else if (!any || v > acc) {
                  acc = v;
                  any = true;
                  winners_[o] = {static_cast<int64_t>(s), k};
                }
              }
            y[o] = max_ ? acc : acc / static_cast<double>(counts_[static_cast<size_t>(r * oh_ * ow_ + b)]);
          }
        }
      store_doubles(y, out[0]);
    });
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    gx[0].fill(0);
    if (!gy[0].defined()) return;
    plan(in[1], in[2]);
    D5_CHECK(!max_ || winners_.size() == static_cast<size_t>(gy[0].numel()), InvalidArgument,
             "{}: backward of mode max called before forward", spec_.label());
    dispatch_all_floats(gy[0].dtype(), spec_, [&]<typename T>() {
      const T* g = gy[0].data_as<T>();
      std::vector<double> dx(static_cast<size_t>(gx[0].numel()), 0.0);
      for (int64_t r = 0; r < rois_; ++r)
        for (int64_t c = 0; c < c_; ++c) {
          double* plane = dx.data() + (batch_[static_cast<size_t>(r)] * c_ + c) * h_ * w_;
          for (int64_t b = 0; b < oh_ * ow_; ++b) {
            const size_t bin = static_cast<size_t>(r * oh_ * ow_ + b);
            const size_t o = static_cast<size_t>((r * c_ + c) * oh_ * ow_ + b);
            const double go = to_double(g[o]);
            if (max_) {
              const auto [s, k] = winners_[o];
              if (s >= 0) plane[bins_[bin][static_cast<size_t>(s)].pos[k]] += go * bins_[bin][static_cast<size_t>(s)].w[k];
              continue;
            }
            const double share = go / static_cast<double>(counts_[bin]);
            for (const Sample& smp : bins_[bin])
              for (int k = 0; k < 4; ++k) plane[smp.pos[k]] += share * smp.w[k];
          }
        }
      store_doubles(dx, gx[0]);
    });
  }

  double flops() const override {
    double samples = 0;
    for (const auto& b : bins_) samples += static_cast<double>(b.size());
    if (bins_.empty()) samples = static_cast<double>(rois_ * oh_ * ow_) * 4;  // before the boxes are known
    return samples * static_cast<double>(c_) * 8;
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() == 3, "{}: needs X, rois and batch_indices, got {} inputs", s.label(), s.inputs.size());
    const TensorDesc &x = s.inputs[0], &rois = s.inputs[1], &idx = s.inputs[2];
    dispatch_all_floats(x.dtype, s, []<typename T>() {});
    D5_CHECK_ARG(x.shape.rank() == 4, "{}: X must be [N, C, H, W], got {}", s.label(), x.shape.to_string());
    D5_CHECK_ARG(rois.dtype == x.dtype && rois.shape.rank() == 2 && rois.shape[1] == 4,
                 "{}: rois must be [num_rois, 4] of X's dtype, got {}", s.label(), rois.to_string());
    D5_CHECK_ARG(idx.dtype == DType::i64 && idx.shape == Shape{rois.shape[0]},
                 "{}: batch_indices must be int64 [{}], got {}", s.label(), rois.shape[0], idx.to_string());
    const int64_t oh = s.attrs.get_int("output_height", 1), ow = s.attrs.get_int("output_width", 1);
    D5_CHECK_ARG(oh >= 1 && ow >= 1, "{}: output_height and output_width must be positive, got {} x {}", s.label(),
                 oh, ow);
    D5_CHECK_ARG(s.attrs.get_int("sampling_ratio", 0) >= 0, "{}: sampling_ratio must not be negative", s.label());
    const std::string mode = s.attrs.get_string("mode", "avg");
    D5_CHECK_ARG(mode == "avg" || mode == "max", "{}: mode '{}' is not avg or max", s.label(), mode);
    const std::string ct = s.attrs.get_string("coordinate_transformation_mode", "half_pixel");
    D5_CHECK_ARG(ct == "half_pixel" || ct == "output_half_pixel",
                 "{}: coordinate_transformation_mode '{}' is not half_pixel or output_half_pixel", s.label(), ct);
    return {TensorDesc{x.dtype, Shape{rois.shape[0], x.shape[1], oh, ow}}};
  }

  // Each bin's samples from the boxes (they may change from call to call).
  void plan(const Tensor& rois, const Tensor& batch) {
    bins_.assign(static_cast<size_t>(rois_ * oh_ * ow_), {});
    counts_.assign(bins_.size(), 1);
    batch_.resize(static_cast<size_t>(rois_));
    const double offset = half_pixel_ ? 0.5 : 0.0;
    for (int64_t r = 0; r < rois_; ++r) {
      const int64_t bi = batch.data_as<int64_t>()[r];
      D5_CHECK_ARG(bi >= 0 && bi < n_, "{}: batch_indices[{}] = {} is not an image of the batch (N = {})",
                   spec_.label(), r, bi, n_);
      batch_[static_cast<size_t>(r)] = bi;
      const double x1 = rois.get(r * 4) * scale_ - offset, y1 = rois.get(r * 4 + 1) * scale_ - offset;
      const double x2 = rois.get(r * 4 + 2) * scale_ - offset, y2 = rois.get(r * 4 + 3) * scale_ - offset;
      double rw = x2 - x1, rh = y2 - y1;
      if (!half_pixel_) {
        rw = std::max(rw, 1.0);
        rh = std::max(rh, 1.0);
      }
      const double bh = rh / static_cast<double>(oh_), bw = rw / static_cast<double>(ow_);
      const int64_t gh = sampling_ > 0 ? sampling_ : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh_)));
      const int64_t gw = sampling_ > 0 ? sampling_ : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow_)));
      for (int64_t ph = 0; ph < oh_; ++ph)
        for (int64_t pw = 0; pw < ow_; ++pw) {
          const size_t bin = static_cast<size_t>((r * oh_ + ph) * ow_ + pw);
          counts_[bin] = std::max<int64_t>(gh * gw, 1);
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix)
              bins_[bin].push_back(
                  sample(y1 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh),
                         x1 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw)));
        }
    }
  }

  Sample sample(double y, double x) const {
    Sample s;
    if (y < -1.0 || y > static_cast<double>(h_) || x < -1.0 || x > static_cast<double>(w_)) return s;  // weights 0
    y = std::max(y, 0.0);
    x = std::max(x, 0.0);
    int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
    if (y0 >= h_ - 1) {
      y0 = y1 = h_ - 1;
      y = static_cast<double>(y0);
    }
    if (x0 >= w_ - 1) {
      x0 = x1 = w_ - 1;
      x = static_cast<double>(x0);
    }
    const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0), hy = 1 - ly, hx = 1 - lx;
    s.pos[0] = y0 * w_ + x0;
    s.pos[1] = y0 * w_ + x1;
    s.pos[2] = y1 * w_ + x0;
    s.pos[3] = y1 * w_ + x1;
    s.w[0] = hy * hx;
    s.w[1] = hy * lx;
    s.w[2] = ly * hx;
    s.w[3] = ly * lx;
    return s;
  }

  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, rois_ = 0, oh_ = 1, ow_ = 1, sampling_ = 0;
  double scale_ = 1;
  bool max_ = false, half_pixel_ = true;
  std::vector<std::vector<Sample>> bins_;  // per (roi, bin), from the last call's boxes
  std::vector<int64_t> counts_, batch_;
  std::vector<std::pair<int64_t, int>> winners_;  // mode max: (sample, corner) per output, from forward
};

}  // namespace

void register_roi_align_ops(OpRegistry& r) { add_op(r, "RoiAlign", true, make<RoiAlignOp>); }

}  // namespace d5::reference
