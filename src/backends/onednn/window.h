#pragma once
// Sliding-window geometry (Conv, ConvTranspose, pooling) in oneDNN's terms. The geometry itself,
// ONNX's kernel_shape / strides / dilations / pads / auto_pad / ceil_mode / output_padding /
// output_shape rules, is deep500/spi/shape_rules.h's, so that every backend validates and sizes
// every case alike. oneDNN counts dilations from 0, and its
// output size is floor((in - extent + left + right) / stride) + 1, so ceil_mode becomes a larger
// right padding (and a right padding may be negative where the windows never reach).
#include "deep500/spi/shape_rules.h"
#include "onednn_common.h"

namespace d5::onednn {

memory::dims dnnl_strides(const Window& w);
memory::dims dnnl_dilations(const Window& w);  // ONNX dilation - 1
memory::dims padding_l(const Window& w);
// The ONNX pads_end when oneDNN's floor formula then gives w.positions over w.image, else the
// exact padding that does (ceil_mode).
memory::dims padding_r(const Window& w);

}  // namespace d5::onednn
