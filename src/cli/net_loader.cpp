#include "net_loader.h"

#include <filesystem>

#include "deep500/error.h"

namespace d5::cli {

// The ONNX importer and the model zoo are separate libraries; each source is added here when its
// library is part of the build.
LoadedNetwork load_network(const std::string& model, int64_t /*batch*/, NetMode /*mode*/) {
  if (std::filesystem::exists(model))
    D5_THROW(Unimplemented, "'{}': this d5 has no ONNX importer built in, so it cannot load model files", model);
  D5_THROW(InvalidArgument, "'{}' is neither a file nor a model of the zoo (this d5 has no model zoo built in)",
           model);
}

}  // namespace d5::cli
