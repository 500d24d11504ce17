#pragma once
// ONNX's shape rules, for every backend (docs/contributing.md#an-operator): broadcasting, axes,
// per-channel parameters, and the sliding windows of convolution and pooling resolved against an
// input shape. An implementation judges a spec with these, so that two backends accept and reject
// the same specs with the same messages and agree on output shapes and padding; a backend never
// includes another backend's headers for them. Every function throws InvalidArgument naming the
// operator (spec.label()) and what to fix.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deep500/op/operator.h"

namespace d5 {

// Multidirectional (NumPy) broadcasting of shapes.
Shape broadcast_shapes(const std::vector<Shape>& shapes, const OpSpec& spec);

// Shapes of a two-input broadcasting op. `in` are the shapes the kernels index with: equal to the
// inputs' shapes, except that a legacy (opset < 7) op with broadcast=1 and 'axis' aligns B's
// axes at A's axis 'axis', which is B's shape padded with trailing ones.
struct BinaryShapes {
  std::array<Shape, 2> in;
  Shape out;
};
// Checks that there are two inputs (and, with same_dtype, that they share a dtype).
BinaryShapes binary_shapes(const OpSpec& spec, bool same_dtype);

// Pad's modes ('mode' attribute; InvalidArgument for another name), and the input coordinate an
// output coordinate (shifted by the leading pad) reads along an axis of extent d, or kPadOutside
// (constant mode's fill). Reflect and wrap repeat periodically, as numpy.pad does for wide pads.
enum class PadMode { constant, reflect, edge, wrap };
inline constexpr int64_t kPadOutside = -1;
PadMode parse_pad_mode(const OpSpec& spec, const std::string& name);
int64_t pad_source(int64_t i, int64_t d, PadMode mode);

// `axis` (negative counts from the end) as an index into a rank-`rank` shape.
size_t checked_axis(const OpSpec& spec, int64_t axis, size_t rank, const char* what = "axis");

// DFT's transformed axis, checked against the signal [batch?, ..., 1|2] of rank r: before opset
// 20 the `axis` attribute, 1..r-2 (default 1, the first after the batch); from opset 20 input 2,
// a constant scalar in -r..-2 or 0..r-2 (default -2, the last signal axis).
size_t dft_axis(const OpSpec& spec);

// Input i must be present and floating point (and of shape `want`).
void check_float_input(const OpSpec& s, size_t i, const char* name);
void check_param_shape(const OpSpec& s, size_t i, const char* name, const Shape& want);

// BatchNormalization's outputs (Y; in training mode also the running mean and variance), after
// checking the input count, X's rank and the parameters' shapes (per channel, or per C x spatial
// with spatial=0).
std::vector<TensorDesc> batch_norm_outputs(const OpSpec& s);

// A window sliding over the spatial axes of one image (N and C excluded).
struct Window {
  std::vector<int64_t> image;      // spatial extents of the image the window slides over
  std::vector<int64_t> positions;  // window positions per axis (a convolution's output extents)
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;

  size_t rank() const { return image.size(); }
  int64_t image_size() const;
  int64_t position_count() const;
  int64_t kernel_size() const;
  int64_t extent(size_t d) const { return (kernel[d] - 1) * dilations[d] + 1; }  // dilated kernel
  // Image coordinate under tap t of the window at position o along axis d (< 0 or >= image[d]
  // in the padding).
  int64_t coord(size_t d, int64_t o, int64_t t) const {
    return o * strides[d] - pads_begin[d] + t * dilations[d];
  }
};

// How many (window position, kernel tap) pairs read the image rather than its padding: the work
// of pooling one plane (each such tap is read and combined once).
int64_t taps_in_image(const Window& w);

// The window attributes as written: kernel_shape, strides, dilations, pads, auto_pad.
struct WindowAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad;

  bool same() const { return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"; }
  // A Window with these kernel, strides, dilations and pads; image and positions left empty.
  Window window() const;
};

// Reads the window attributes for `rank` spatial axes. `weight_kernel` is the kernel taken from
// a weight tensor (Conv, ConvTranspose: kernel_shape must then match it if given) or empty
// (pooling: kernel_shape is required). Checks lengths and ranges.
WindowAttrs parse_window_attrs(const OpSpec& spec, size_t rank, const std::vector<int64_t>& weight_kernel);

// Output extents and effective pads of Conv / MaxPool / AveragePool over `image` (ONNX rules:
// auto_pad SAME_UPPER / SAME_LOWER / VALID, ceil_mode with PyTorch's "the last window starts
// inside the image or its left padding").
Window sliding_window(const OpSpec& spec, const WindowAttrs& attrs, const std::vector<int64_t>& image,
                      bool ceil_mode);

// The dimensions of a Conv (transposed = false) or ConvTranspose (true) from its input
// descriptors, validated: X [N, C, spatial...], W [M, C/group, kernel...] (Conv) or
// [C, M/group, kernel...] (ConvTranspose), optional B [M], one floating dtype.
struct ConvDims {
  int64_t n, c, m, group;
  bool bias;
  std::vector<int64_t> image, kernel;  // spatial extents of X; kernel from W

  // Inputs with a gradient: X and W, and B when present.
  std::vector<bool> gradient_mask(size_t n_inputs) const {
    std::vector<bool> mask(n_inputs, true);
    if (mask.size() > 2) mask[2] = bias;
    return mask;
  }
};
ConvDims conv_dims(const OpSpec& spec, bool transposed);

// Work of a Conv (or, transposed, a ConvTranspose) with window w: per window position, C/group *
// kernel multiply-adds for each of M channels; for ConvTranspose the same per input pixel with the
// roles of C and M swapped.
double conv_flops(const ConvDims& d, const Window& w, bool transposed);

// ConvTranspose's window: it slides over Y (the image), one position per pixel of X; the output
// extents and pads come from pads / output_padding / output_shape / auto_pad (ONNX rules).
Window transposed_window(const OpSpec& spec, const ConvDims& d);

}  // namespace d5
