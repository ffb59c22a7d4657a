// Fixed-width integers stored little-endian whatever the host, so files and
// pages written on one machine read on another.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace pagefile {

// On a little-endian host an integer is stored as it lies in memory: one
// copy, which compilers make one move. (The byte loop below is not always
// merged into one: a checksum block's 256 entries read so cost a small
// commit 2% of its CPU.)
template <class T>
void put_le(std::span<std::byte> out, size_t at, T value) {
  if constexpr (std::endian::native == std::endian::little && std::is_integral_v<T>) {
    std::memcpy(out.subspan(at, sizeof(T)).data(), &value, sizeof(T));
  } else {
    for (size_t i = 0; i < sizeof(T); ++i) {
      out[at + i] = static_cast<std::byte>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff);
    }
  }
}

template <class T>
T get_le(std::span<const std::byte> in, size_t at) {
  if constexpr (std::endian::native == std::endian::little && std::is_integral_v<T>) {
    T value;
    std::memcpy(&value, in.subspan(at, sizeof(T)).data(), sizeof(T));
    return value;
  } else {
    uint64_t value = 0;
    for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<uint64_t>(in[at + i]) << (8 * i);
    return static_cast<T>(value);
  }
}

// One field of a little-endian record: its width and its offset, named once
// so that the record's encoder and decoder cannot disagree on either.
template <class T>
struct LeField {
  size_t at;

  // The offset just past the field, where a packed record's next field starts.
  constexpr size_t end() const { return at + sizeof(T); }
  void put(std::span<std::byte> out, T value) const { put_le<T>(out, at, value); }
  T get(std::span<const std::byte> in) const { return get_le<T>(in, at); }
};

}  // namespace pagefile
