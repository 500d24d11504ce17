#pragma once
// The graph tensor names of classifier networks: every zoo model uses them, and the trainer reads
// them by default, so a zoo model trains without naming its tensors.
namespace d5 {

inline constexpr const char* kZooInput = "input";
inline constexpr const char* kZooLogits = "logits";
inline constexpr const char* kZooLabels = "labels";
inline constexpr const char* kZooLoss = "loss";
// A sequence-to-sequence model's second input: the target shifted right behind a start token.
inline constexpr const char* kZooDecoderInput = "decoder_input";
// A single-shot detector's prior boxes (a constant [anchors, 4]: x1, y1, x2, y2), which its loss
// matches objects to and its measures decode predictions from; and the objects' boxes its loss
// reads beside the labels ([batch, objects, 4], the detection datasets' "boxes").
inline constexpr const char* kZooAnchors = "anchors";
inline constexpr const char* kZooBoxes = "boxes";

}  // namespace d5
