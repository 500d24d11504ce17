#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "ref_common.h"

namespace d5::reference {

void register_backend() {
  BackendInfo b;
  b.name = "reference";
  b.description = "readable C++ implementations of every operator; the oracle others are checked against";
  b.version = build_info().version;
  d5::register_backend(std::move(b));
}

// The one list of reference operator families.
void register_operators(OpRegistry& r) {
  register_unary_ops(r);
  register_normalization_ops(r);
  register_softmax_ops(r);
  register_reduce_ops(r);
  register_loss_ops(r);
  register_binary_ops(r);
  register_variadic_ops(r);
  register_logic_ops(r);
  register_selection_ops(r);
  register_shape_ops(r);
  register_data_movement_ops(r);
  register_cast_dropout_ops(r);
  register_rnn_ops(r);
  register_nn_ops(r);
}

void register_all() {
  static const bool once = [] {
    register_backend();
    register_operators(OpRegistry::global());
    return true;
  }();
  (void)once;
}

}  // namespace d5::reference
