// While a KnownKeysRecorder is alive, every JsonFields whose `where` starts with its `origin`
// reports, at reject_unknown, the keys its reader asked about: what a document may hold, taken
// from the parser itself, so that a reference page can be checked against it
// (tests/config_reference_test.cpp). Keys are grouped by object path: "training",
// "parallel.channels.weights", "simulation.stragglers[]" ("" for the top level).
#pragma once

#include <map>
#include <set>
#include <string>

namespace ddpsim {

class KnownKeysRecorder {
 public:
  // One at a time, on one thread.
  explicit KnownKeysRecorder(std::string origin);
  ~KnownKeysRecorder();
  KnownKeysRecorder(const KnownKeysRecorder&) = delete;
  KnownKeysRecorder& operator=(const KnownKeysRecorder&) = delete;

  const std::map<std::string, std::set<std::string>>& keys() const { return keys_; }
  // Called by JsonFields::reject_unknown with its `where` and the keys it was asked about.
  void add(const std::string& where, const std::set<std::string, std::less<>>& known);

 private:
  std::string origin_;
  std::map<std::string, std::set<std::string>> keys_;
};

}  // namespace ddpsim
