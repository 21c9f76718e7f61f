#include "model/layout.hpp"

namespace ddptrain {

nlohmann::ordered_json layout_model(DistilBertForSequenceClassification& model, const std::string& name) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& item : model->named_parameters()) {
    const auto n = item.value().numel();
    const bool embedding =
        item.key().find("embeddings.") != std::string::npos && item.key().find("LayerNorm") == std::string::npos;
    layers.push_back({{"name", item.key()}, {"params", n}, {"bwd_fraction", embedding ? double(n) / 25.0 : double(n)}});
  }
  return {{"name", name},
          {"source", "parameter layout of ddptrain's DistilBERT \"" + name +
                         "\" (ddptrain --write-layout); no timings: a base for ddpsim calibrate"},
          {"forward_ms", {{"a", 0}, {"beta", 0}, {"gamma", 0}}},
          {"backward_ms", {{"a", 0}, {"beta", 0}, {"gamma", 0}}},
          {"gradient_bytes_per_param", 4},
          {"layers", layers}};
}

}  // namespace ddptrain
