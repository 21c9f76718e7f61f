#include "model/safetensors_header.hpp"

#include <limits>

#include "common/json_util.hpp"

namespace ddptrain {

namespace {

struct DType {
  const char* name;
  std::size_t bytes;
};
constexpr DType DTYPES[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"I32", 4}};

}  // namespace

std::vector<TensorEntry> parse_safetensors_header(std::string_view header, std::uint64_t data_size,
                                                  const std::string& path) {
  const nlohmann::json doc = ddpsim::parse_json(header, path + ": header");
  if (!doc.is_object()) throw ddpsim::InputError(path + ": header is not a JSON object");
  std::vector<TensorEntry> entries;
  for (const auto& [name, value] : doc.items()) {
    const std::string where = path + ": tensor \"" + name + "\"";
    if (name == "__metadata__") {
      if (!value.is_object()) throw ddpsim::wrong_type(value, where, "an object of strings");
      for (const auto& [key, text] : value.items())
        if (!text.is_string()) throw ddpsim::wrong_type(text, where + ": key \"" + key + "\"", "a string");
      continue;
    }
    if (!value.is_object()) throw ddpsim::wrong_type(value, where, "an object {dtype, shape, data_offsets}");
    const ddpsim::JsonFields fields(value, where);
    TensorEntry entry;
    entry.name = name;
    entry.dtype = fields.require<std::string>("dtype");
    for (const auto& d : DTYPES)
      if (entry.dtype == d.name) entry.element_bytes = d.bytes;
    if (entry.element_bytes == 0)
      throw ddpsim::InputError(where + ": unsupported dtype \"" + entry.dtype +
                               "\" (supported: F32, F16, BF16, F64, I64, I32)");
    entry.shape = fields.require<std::vector<std::int64_t>>("shape");
    const auto offsets = fields.require<std::vector<std::uint64_t>>("data_offsets");
    fields.reject_unknown();
    // The product is bounded by the data size at every factor, so it cannot overflow.
    std::uint64_t bytes = entry.element_bytes;
    for (const auto d : entry.shape) {
      if (d < 0) throw ddpsim::InputError(where + ": negative dimension " + std::to_string(d) + " in its shape");
      if (d != 0 && bytes > data_size / static_cast<std::uint64_t>(d))
        throw ddpsim::InputError(where + ": its shape holds more bytes than the file's " + std::to_string(data_size) +
                                 " bytes of data");
      bytes *= static_cast<std::uint64_t>(d);
    }
    if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size)
      throw ddpsim::InputError(where + ": data_offsets must be [begin, end] with begin <= end <= " +
                               std::to_string(data_size) + " (the data section's size)");
    if (offsets[1] - offsets[0] != bytes)
      throw ddpsim::InputError(where + ": data_offsets span " + std::to_string(offsets[1] - offsets[0]) +
                               " bytes, its shape and dtype need " + std::to_string(bytes));
    entry.begin = offsets[0];
    entry.end = offsets[1];
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace ddptrain
