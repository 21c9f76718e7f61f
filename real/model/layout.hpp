// A DistilBERT's parameter layout as a ddpsim performance model (`ddptrain --write-layout`), so
// that `ddpsim calibrate --base` gives a calibrated model the trained model's gradient buckets,
// whatever its size. Groups follow the built-in models: Hugging Face names without the
// "distilbert." prefix, one group per embedding, LayerNorm, attention block, FFN and head, in
// registration order.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model/distilbert.hpp"

namespace ddptrain {

// The model document: the layers with their element counts and shares of backward time, no
// timings (calibrate fits those). A group's share is its multiply-accumulates per token: a
// linear layer's or a norm's elements, an embedding's elements / 25 (its gradient is a
// scatter of rows, not a matrix product; the ratio of the built-in DistilBERT model).
nlohmann::ordered_json layout_model(DistilBertForSequenceClassification& model, const std::string& name);

}  // namespace ddptrain
