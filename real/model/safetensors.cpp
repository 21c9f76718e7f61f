#include "model/safetensors.hpp"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/interrupt.hpp"
#include "model/safetensors_header.hpp"

namespace ddptrain {

namespace {

torch::ScalarType torch_type(const std::string& dtype) {
  static const std::map<std::string, torch::ScalarType> types = {{"F32", torch::kFloat32},   {"F16", torch::kFloat16},
                                                                 {"BF16", torch::kBFloat16}, {"F64", torch::kFloat64},
                                                                 {"I64", torch::kInt64},     {"I32", torch::kInt32}};
  return types.at(dtype);  // parse_safetensors_header admits only these
}

const char* dtype_name(torch::ScalarType type) {
  for (const char* name : {"F32", "F16", "BF16", "F64", "I64", "I32"})
    if (torch_type(name) == type) return name;
  throw std::runtime_error(std::string("safetensors: cannot write dtype ") + c10::toString(type));
}

std::string shape_text(c10::IntArrayRef shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  ddpsim::check_input_file(path, "safetensors file", 1024 * 1024 * ddpsim::MiB);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ddpsim::InputError(path + ": cannot open safetensors file");
  const auto file_size = std::filesystem::file_size(path);
  unsigned char size_bytes[8];
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8)) throw ddpsim::InputError(path + ": shorter than 8 bytes");
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | size_bytes[i];
  if (header_size > file_size - 8)
    throw ddpsim::InputError(path + ": header size " + std::to_string(header_size) + " exceeds the file");
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  const std::uint64_t data_start = 8 + header_size;
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& entry : parse_safetensors_header(header, file_size - data_start, path)) {
    auto t = torch::empty(entry.shape, torch::TensorOptions().dtype(torch_type(entry.dtype)));
    in.seekg(static_cast<std::streamoff>(data_start + entry.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(entry.end - entry.begin));
    if (!in) throw ddpsim::InputError(path + ": tensor \"" + entry.name + "\": read error inside its data");
    tensors.emplace(entry.name, std::move(t));  // safetensors is little-endian, like every host LibTorch runs on
  }
  return tensors;
}

void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::uint64_t offset = 0;
  std::vector<torch::Tensor> data;
  for (const auto& [name, tensor] : tensors) {
    const auto t = tensor.detach().to(torch::kCPU).contiguous();
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.nbytes());
    header[name] = {
        {"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(t);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned, as the reference writer does
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int slot = ddpsim::remember_temporary(temp);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    unsigned char size_bytes[8];
    std::uint64_t n = text.size();
    for (int i = 0; i < 8; ++i, n >>= 8) size_bytes[i] = static_cast<unsigned char>(n & 0xff);
    out.write(reinterpret_cast<const char*>(size_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : data)
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
    if (!out.flush()) {
      std::filesystem::remove(temp);
      ddpsim::forget_temporary(slot);
      throw std::runtime_error(path + ": write failed");
    }
  }
  std::filesystem::rename(temp, path);
  ddpsim::forget_temporary(slot);
}

LoadReport load_parameters(torch::nn::Module& module, const std::string& path) {
  const auto tensors = read_safetensors(path);
  LoadReport report;
  torch::NoGradGuard no_grad;
  auto params = module.named_parameters();
  for (auto& p : params) {
    const auto it = tensors.find(p.key());
    if (it == tensors.end()) {
      report.absent.push_back(p.key());
      continue;
    }
    if (it->second.sizes() != p.value().sizes())
      throw std::runtime_error(path + ": tensor \"" + p.key() + "\" has shape " + shape_text(it->second.sizes()) +
                               ", the model expects " + shape_text(p.value().sizes()));
    p.value().copy_(it->second.to(p.value().dtype()));
    report.loaded++;
  }
  report.unused = static_cast<int>(tensors.size()) - report.loaded;
  return report;
}

}  // namespace ddptrain
