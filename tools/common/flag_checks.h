// Checks of numeric flags that CLI11's own leave open (CLI11 2.1).
//
// CLI::Range lets "nan" through: no comparison with NaN is true, so NaN is
// never below the minimum nor above the maximum. And an unsigned flag takes
// "-1" as its type's largest value (strtoull wraps it), so an unsigned flag
// needs a Range below that value, or kNotNegative where every value is
// valid, to refuse a negative one.
#pragma once

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>

namespace pagefile::tools {

// A floating-point flag's value is a finite number: chain it before the
// flag's Range, ->check(tools::kFinite)->check(CLI::Range(0.0, 1.0)), so
// that NaN and infinities are refused by name rather than turned into an
// integer later (which is undefined for NaN).
inline const CLI::Validator kFinite(
    [](std::string& text) {
      double value = 0;
      if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value)) {
        return "Value " + text + " is not a finite number";
      }
      return std::string();
    },
    "FINITE");

// An unsigned flag's value has no minus sign, for a flag that takes every
// value of its type (a seed), where no Range can tell "-1" from the largest.
inline const CLI::Validator kNotNegative(
    [](std::string& text) {
      return text.find('-') == std::string::npos ? std::string() : "Value " + text + " is negative";
    },
    "NOT NEGATIVE");

}  // namespace pagefile::tools
