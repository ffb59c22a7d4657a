// An enum's names as a table of {value, name}, looked up either way: one
// table serves both a value's name and the parse of a word.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace pagefile {

template <typename Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

// The name `names` gives `value`, or `unknown` when it gives none.
template <typename Enum, std::size_t N>
constexpr std::string_view name_of(const EnumName<Enum> (&names)[N], Enum value, std::string_view unknown) {
  for (const EnumName<Enum>& entry : names) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

// The value `names` calls `name`, if any.
template <typename Enum, std::size_t N>
constexpr std::optional<Enum> value_named(const EnumName<Enum> (&names)[N], std::string_view name) {
  for (const EnumName<Enum>& entry : names) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

}  // namespace pagefile
