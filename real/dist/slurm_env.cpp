// Exists to keep Slurm's conventions (variables, host list syntax) out of the rendezvous code.
#include "dist/slurm_env.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace ddptrain {

namespace {

[[noreturn]] void bad_list(const std::string& list, const std::string& why) {
  throw std::runtime_error("SLURM_JOB_NODELIST=\"" + list + "\": " + why);
}

// Splits on commas outside brackets, since "a[1,3],b" is two entries, not three.
std::vector<std::string> top_level_items(const std::string& list) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) bad_list(list, "']' without '['");
    if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (depth != 0) bad_list(list, "'[' without ']'");
  items.push_back(item);
  return items;
}

// One bracket's body ("01-04,07") as names of its numbers; the low bound's width is the padding,
// as Slurm writes it ("node[08-10]" is node08 node09 node10).
std::vector<std::string> expand_range(const std::string& body, const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const std::size_t comma = std::min(body.find(',', start), body.size());
    const std::string part = body.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    const std::string lo = part.substr(0, dash), hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    const auto digits = [](const std::string& s) {
      return !s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(lo) || !digits(hi)) bad_list(list, "range \"" + part + "\" is not N or N-M");
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a) bad_list(list, "range \"" + part + "\" runs backwards");
    if (b - a > 100000) bad_list(list, "range \"" + part + "\" is implausibly long");
    for (long v = a; v <= b; ++v) {
      std::string name = std::to_string(v);
      if (name.size() < lo.size()) name.insert(0, lo.size() - name.size(), '0');
      out.push_back(name);
    }
    start = comma + 1;
  }
  return out;
}

// Cartesian product over every bracket of one entry, leftmost varying slowest like Slurm.
void expand_item(const std::string& item, const std::string& list, std::vector<std::string>& out) {
  const std::size_t open = item.find('[');
  if (open == std::string::npos) {
    out.push_back(item);
    return;
  }
  const std::size_t close = item.find(']', open);
  const std::string prefix = item.substr(0, open), rest = item.substr(close + 1);
  for (const auto& number : expand_range(item.substr(open + 1, close - open - 1), list)) {
    std::vector<std::string> tails;
    expand_item(rest, list, tails);
    for (const auto& tail : tails) out.push_back(prefix + number + tail);
  }
}

int slurm_int(const char* name, int fallback, int minimum) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end || value < minimum || value > 1 << 20)
    throw std::runtime_error(std::string("environment variable ") + name + "=\"" + text + "\" is not an integer ≥ " +
                             std::to_string(minimum));
  return static_cast<int>(value);
}

bool shell_safe(const std::string& s) {
  return s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,[]") ==
         std::string::npos;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  if (list.empty()) bad_list(list, "empty");
  std::vector<std::string> hosts;
  for (const auto& item : top_level_items(list)) {
    if (item.empty()) bad_list(list, "empty entry");
    expand_item(item, list, hosts);
  }
  return hosts;
}

std::string first_slurm_host(const std::string& list) {
  // The quoting guard keeps a hostile variable out of the shell; such a list goes to the parser.
  if (shell_safe(list)) {
    const std::string command = "scontrol show hostnames '" + list + "' 2>/dev/null";
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
      char line[512] = {};
      const bool got = std::fgets(line, sizeof line, pipe) != nullptr;
      const int status = ::pclose(pipe);
      std::string host = got ? line : "";
      while (!host.empty() && (host.back() == '\n' || host.back() == '\r')) host.pop_back();
      if (status == 0 && !host.empty()) return host;
    }
  }
  return expand_hostlist(list).front();
}

std::optional<SlurmPlace> slurm_place_from_environment() {
  const char* procid = std::getenv("SLURM_PROCID");
  if (!procid || !*procid) return std::nullopt;
  SlurmPlace p;
  p.rank = slurm_int("SLURM_PROCID", 0, 0);
  p.world_size = slurm_int("SLURM_NTASKS", 1, 1);
  p.local_rank = slurm_int("SLURM_LOCALID", 0, 0);
  if (p.rank >= p.world_size)
    throw std::runtime_error("SLURM_PROCID=" + std::to_string(p.rank) +
                             " is not below SLURM_NTASKS=" + std::to_string(p.world_size));
  if (const char* list = std::getenv("SLURM_JOB_NODELIST"); list && *list) p.host = first_slurm_host(list);
  if (const char* id = std::getenv("SLURM_JOB_ID"); id && *id) p.job_id = slurm_int("SLURM_JOB_ID", 0, 0);
  return p;
}

}  // namespace ddptrain
