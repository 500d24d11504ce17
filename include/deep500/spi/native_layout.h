#pragma once
// Layouts of a backend's own (oneDNN's blocked nChw16c, ...) that tensors keep between operators
// of that backend, so that a graph executor reorders only where a tensor leaves them: at an
// operator of another backend, a graph output, a value the caller reads (docs/executors.md,
// "Native layouts").
//
// The executor treats such a layout as opaque: it asks the producer which layout an output would
// have, asks every consumer whether it takes that layout, and if all do, creates variants of the
// operators that exchange the tensor in it. The tensor travels as a flat f32 tensor of the
// layout's storage (padding included); only the backend reads its bytes.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deep500/op/operator.h"

namespace d5 {

struct BackendLayout {
  std::string backend;        // whose layout: "onednn"
  std::string name;           // for reports: "aBcd16b" (nChw16c)
  std::vector<uint8_t> desc;  // the backend's own descriptor, bytewise
  int64_t elements = 0;       // f32 elements of storage, padding included

  bool operator==(const BackendLayout&) const = default;
  // What the executor allocates for a tensor in this layout.
  TensorDesc storage() const { return TensorDesc{DType::f32, Shape{elements}}; }
};

// Activation reorders one forward call of an operator runs: of inputs into the layouts its
// primitives want, of outputs into the layout the caller gets. Weight reorders are not counted.
struct LayoutReorders {
  int inputs = 0, outputs = 0;
};

// Implemented by operators that can exchange tensors in their backend's layouts. Variants serve
// inference only: they have no backward.
class NativeLayoutOperator {
 public:
  virtual ~NativeLayoutOperator() = default;
  // Whether input `i` may arrive in layout `l` (the variant reads it as is or reorders it itself).
  virtual bool accepts_layout(size_t i, const BackendLayout& l) const = 0;
  // A forward-only variant of this operator whose input i arrives in `in[i]` (none: plain) and
  // whose output j stays in the layout its primitive writes when keep[j]. Its spec() and
  // output_descs() name the storage descriptors of those inputs and outputs.
  virtual std::unique_ptr<Operator> with_layouts(const std::vector<std::optional<BackendLayout>>& in,
                                                 const std::vector<bool>& keep) const = 0;
  // The layout output j has in this operator (none: plain); of a variant asked to keep every
  // output, which ones it can keep.
  virtual std::optional<BackendLayout> output_layout(size_t j) const = 0;
  virtual LayoutReorders reorders() const = 0;
};

}  // namespace d5
