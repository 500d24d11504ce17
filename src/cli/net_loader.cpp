#include "net_loader.h"

#include <filesystem>

#include "deep500/core/error.h"
#include "deep500/net/model_zoo.h"
#ifdef D5_HAVE_ONNX
#include "deep500/onnx/onnx_import.h"
#endif

namespace d5::cli {

LoadedNetwork load_network(const std::string& model, int64_t batch, NetMode mode) {
  // A file is an ONNX model.
  if (std::filesystem::exists(model)) {
#ifdef D5_HAVE_ONNX
    ImportOptions io;
    io.batch = batch;  // symbolic first dimensions; a model exported for a fixed batch keeps it
    return LoadedNetwork{import_onnx_file(model, io), "onnx:" + model, ""};
#else
    D5_THROW(NotBuilt, "'{}': this d5 was built without ONNX support (libonnx-dev), so it cannot load model "
             "files", model);
#endif
  }
  ModelOptions options;
  options.batch = batch;
  // A training step needs the loss, and BatchNormalization/Dropout in their training behaviour.
  options.with_loss = options.training = mode == NetMode::TrainStep;
  LoadedNetwork loaded{build_model(model, options), "zoo:" + model, options.with_loss ? kZooLoss : ""};
  return loaded;
}

}  // namespace d5::cli
