// A DistilBERT's parameter layout as a ddpsim performance model (`ddptrain --write-layout`), so
// that `ddpsim calibrate --base` gives a calibrated model the trained model's gradient buckets,
// whatever its size. One layer per parameter tensor in registration order, as PyTorch's DDP
// reducer buckets them (and as the built-in models list them).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model/distilbert.hpp"

namespace ddptrain {

// The model document: the layers with their element counts and shares of backward time, no
// timings (calibrate fits those). A tensor's share of backward is its multiply-accumulates per
// token: a linear layer's or a norm's elements, an embedding's elements / 25 (its gradient is
// a scatter of rows, not a matrix product).
nlohmann::ordered_json layout_model(DistilBertForSequenceClassification& model, const std::string& name);

}  // namespace ddptrain
