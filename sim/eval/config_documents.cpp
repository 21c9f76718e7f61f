// The config documents before they are parsed: the embedded default, a file read, and
// --set's KEY=VALUE written into them (config.hpp declares these).
#include <cerrno>
#include <cstdlib>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "embedded_default_config.hpp"
#include "eval/config.hpp"

namespace ddpsim {

nlohmann::json default_config_json() {
  return parse_json(embedded::default_config, "embedded default config");
}

nlohmann::json read_config_json(const std::string& path) {
  if (path.empty()) return default_config_json();
  nlohmann::json doc = read_json_file(path);
  // Before any --set or --steps lands in it, so that they are not blamed for the file's shape.
  if (!doc.is_object()) throw InputError(path + ": expected a JSON object, got " + std::string(doc.type_name()));
  refuse_other_kind(doc, path, FileKind::config);
  return doc;
}

void apply_override(nlohmann::json& doc, std::string_view assignment) {
  try {
    (void)nlohmann::json(std::string(assignment)).dump();  // its text ends up in messages and outputs
  } catch (const nlohmann::json::type_error&) {
    throw UsageError("--set: the assignment is not valid UTF-8 text");
  }
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw UsageError("--set \"" + std::string(assignment) + "\": expected key=value, e.g. training.global_batch=64");
  const std::string key(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  if (text.empty()) throw UsageError("--set " + key + "=: no value after '=' (an empty string is written '\"\"')");
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Not JSON: a string, unless it is a number beyond a double's range (1e400).
    char* end = nullptr;
    errno = 0;
    std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && errno == ERANGE)
      throw UsageError("--set " + key + ": " + text + " is beyond the range of a number");
    // Text that opens an object or an array was meant as JSON: say why it is not.
    if (text.front() == '{' || text.front() == '[') {
      try {
        parse_json(text, "--set " + key);
      } catch (const InputError& e) {
        throw UsageError(e.what());
      }
    }
    value = text;
  } else {
    try {
      value = parse_json(text, "--set " + key);  // again, strictly: a key given twice is refused
    } catch (const InputError& e) {
      throw UsageError(e.what());  // as any other malformed --set: the command line is at fault
    }
  }
  if (const std::string why = set_by_path(doc, key, std::move(value)); !why.empty())
    throw UsageError("--set " + key + ": " + why);
}

std::string set_by_path(nlohmann::json& doc, std::string_view key, nlohmann::json value) {
  nlohmann::json* node = &doc;
  std::size_t begin = 0;
  for (;;) {
    const auto dot = key.find('.', begin);
    const std::string part(key.substr(begin, dot == std::string_view::npos ? dot : dot - begin));
    if (part.empty()) return "empty key segment";
    if (node->is_null()) *node = nlohmann::json::object();  // a section the config leaves out
    if (!node->is_object()) return "\"" + part + "\" is inside a non-object value";
    node = &(*node)[part];
    if (dot == std::string_view::npos) break;
    begin = dot + 1;
  }
  *node = std::move(value);
  return "";
}

}  // namespace ddpsim
