#include "net_loader.h"

#include <filesystem>

#include "deep500/error.h"
#include "deep500/model_zoo.h"

namespace d5::cli {

LoadedNetwork load_network(const std::string& model, int64_t batch, NetMode mode) {
  // A file is an ONNX model; the importer is a separate library, added here when it is built.
  if (std::filesystem::exists(model))
    D5_THROW(Unimplemented, "'{}': this d5 has no ONNX importer built in, so it cannot load model files",
             model);
  ModelOptions options;
  options.batch = batch;
  // A training step needs the loss, and BatchNormalization/Dropout in their training behaviour.
  options.with_loss = options.training = mode == NetMode::TrainStep;
  LoadedNetwork loaded{build_model(model, options), "zoo:" + model, options.with_loss ? kZooLoss : ""};
  return loaded;
}

}  // namespace d5::cli
