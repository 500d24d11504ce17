#pragma once
// The graph tensor names of classifier networks: every zoo model uses them, and the trainer reads
// them by default, so a zoo model trains without naming its tensors.
namespace d5 {

inline constexpr const char* kZooInput = "input";
inline constexpr const char* kZooLogits = "logits";
inline constexpr const char* kZooLabels = "labels";
inline constexpr const char* kZooLoss = "loss";

}  // namespace d5
