// The reference backend: its info, its operators and its executor, and the plugin that lists them
// (spi/backend_plugin.h).
#include "deep500/core/backend.h"
#include "deep500/core/build_info.h"
#include "deep500/net/operator_executor.h"
#include "deep500/spi/backend_plugin.h"
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
  register_cumsum_ops(r);
  register_einsum_ops(r);
  register_elements_indexing_ops(r);
  register_topk_ops(r);
  register_trilu_ops(r);
  register_resize_ops(r);
  register_roi_align_ops(r);
  register_non_max_suppression_ops(r);
  register_range_ops(r);
  register_dft_ops(r);
  register_mel_weight_matrix_ops(r);
  register_ctc_loss_ops(r);
  register_ssd_loss_ops(r);
}

void register_all() {
  static const bool once = [] {
    register_backend();
    register_operators(OpRegistry::global());
    return true;
  }();
  (void)once;
}

namespace {

// Once: the torch backend registers them too, for the shapes it validates against.
void register_operators_once(OpRegistry& /*global*/) { register_all(); }

void register_executors() {
  register_executor("reference", [](Network& network, const ExecutorOptions& o) -> std::unique_ptr<GraphExecutor> {
    return std::make_unique<ReferenceExecutor>(network, operator_executor_options(o));
  });
}

}  // namespace

}  // namespace d5::reference

namespace d5::plugins {
extern const BackendPlugin reference;
const BackendPlugin reference{"reference", &d5::reference::register_backend, &d5::reference::register_operators_once,
                              &d5::reference::register_executors, nullptr};
}  // namespace d5::plugins
