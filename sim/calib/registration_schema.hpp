// read_registration's check of the figures it will score (kept apart from the scoring itself).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ddpsim {

// Throws InputError "FILE: key setting.steps ..." where the setting, the config's --set list or
// a registered policy's figures are missing, mistyped or inconsistent (a gain outside its own
// interval, a baseline other than the first policy).
void check_registration_figures(const nlohmann::json& doc, const std::string& file);

}  // namespace ddpsim
