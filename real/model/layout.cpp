#include "model/layout.hpp"

namespace ddptrain {

namespace {

// "distilbert.transformer.layer.3.ffn.lin1.weight" → "transformer.layer.3.ffn".
std::string group_of(std::string name) {
  const std::string prefix = "distilbert.";
  if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());
  const int keep = name.rfind("transformer.", 0) == 0 ? 4 : name.rfind("embeddings.", 0) == 0 ? 2 : 1;
  std::size_t end = 0;
  for (int part = 0; part < keep && end != std::string::npos; ++part) end = name.find('.', end ? end + 1 : 0);
  return end == std::string::npos ? name : name.substr(0, end);
}

}  // namespace

nlohmann::ordered_json layout_model(DistilBertForSequenceClassification& model, const std::string& name) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& item : model->named_parameters()) {
    const std::string group = group_of(item.key());
    if (layers.empty() || layers.back()["name"] != group)
      layers.push_back({{"name", group}, {"params", 0}, {"bwd_fraction", 0.0}});
    auto& layer = layers.back();
    const auto n = item.value().numel();
    layer["params"] = layer["params"].get<std::int64_t>() + n;
    const double share = group.rfind("embeddings.", 0) == 0 && group != "embeddings.LayerNorm" ? n / 25.0 : double(n);
    layer["bwd_fraction"] = layer["bwd_fraction"].get<double>() + share;
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
