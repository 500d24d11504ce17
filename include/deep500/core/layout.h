#pragma once
#include <string_view>

#include "deep500/core/c_tensor_desc.h"

namespace d5 {

// Memory layout of an activation tensor. `any` means plain row-major with no image semantics
// (or "let the backend choose" when requested from a backend).
enum class Layout : int32_t { any = D5_LAYOUT_ANY, nchw = D5_LAYOUT_NCHW, nhwc = D5_LAYOUT_NHWC };

std::string_view to_string(Layout l);
Layout parse_layout(std::string_view name);

}  // namespace d5
