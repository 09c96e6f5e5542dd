#pragma once

// Key types of the binary-search benchmark (Psaropoulos 4.2.1): 32-bit integers and 15-character
// strings in fixed 16-byte slots. Both keep the array value at index i a function of i, so huge
// arrays fill quickly and lookups can hit or miss by choice.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace mx::bench::bsearch {

using IntKey = std::uint32_t;

/// 15 decimal digits plus a NUL, so byte order is numeric order.
struct alignas(16) StringKey {
    char bytes[16];

    static StringKey from(std::uint64_t number) noexcept {
        StringKey key{};
        for (int i = 14; i >= 0; --i) {
            key.bytes[i] = static_cast<char>('0' + number % 10);
            number /= 10;
        }
        key.bytes[15] = '\0';
        return key;
    }
    [[nodiscard]] std::string str() const { return std::string(bytes, 15); }
    friend bool operator==(const StringKey &a, const StringKey &b) noexcept {
        return std::memcmp(a.bytes, b.bytes, sizeof(a.bytes)) == 0;
    }
};
static_assert(sizeof(StringKey) == 16);

/// Lexicographic order as one 128-bit compare of the byte-swapped halves: the work of a 16-byte
/// memcmp without a call or a branch (GCC turns a two-step compare of the halves into jumps).
inline bool key_less(const StringKey &a, const StringKey &b) noexcept {
    __extension__ using U128 = unsigned __int128;
    std::uint64_t a_hi = 0;
    std::uint64_t a_lo = 0;
    std::uint64_t b_hi = 0;
    std::uint64_t b_lo = 0;
    std::memcpy(&a_hi, a.bytes, 8);
    std::memcpy(&a_lo, a.bytes + 8, 8);
    std::memcpy(&b_hi, b.bytes, 8);
    std::memcpy(&b_lo, b.bytes + 8, 8);
    const U128 left = (U128{__builtin_bswap64(a_hi)} << 64U) | __builtin_bswap64(a_lo);
    const U128 right = (U128{__builtin_bswap64(b_hi)} << 64U) | __builtin_bswap64(b_lo);
    return left < right;
}
inline bool key_less(IntKey a, IntKey b) noexcept { return a < b; }

/// `take ? probe : low` without a branch. GCC 12 compiles the ternary into a jump when the
/// operands live in a coroutine frame or the condition is a compound compare, which costs a
/// mispredict on every other probe. Every variant selects through this, so all are branch-free.
inline std::size_t select_probe(bool take, std::size_t probe, std::size_t low) noexcept {
    const std::size_t mask = std::size_t{0} - static_cast<std::size_t>(take);
    return low ^ ((low ^ probe) & mask);
}

struct KeyLess {
    template <class Key>
    bool operator()(const Key &a, const Key &b) const noexcept {
        return key_less(a, b);
    }
};

/// Value stored at index i: even numbers, so odd lookups miss.
template <class Key>
Key key_at(std::uint64_t i) noexcept;
template <>
inline IntKey key_at<IntKey>(std::uint64_t i) noexcept {
    return static_cast<IntKey>(2 * i);
}
template <>
inline StringKey key_at<StringKey>(std::uint64_t i) noexcept {
    return StringKey::from(2 * i);
}

/// Fills table[0, n) with key_at(i). Strings count up in place instead of formatting each one.
inline void fill_table(IntKey *table, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        table[i] = key_at<IntKey>(i);
    }
}
inline void fill_table(StringKey *table, std::size_t n) noexcept {
    if (n == 0) {
        return;
    }
    StringKey current = StringKey::from(0);
    for (std::size_t i = 0; i < n; ++i) {
        table[i] = current;
        // Add 2 to the 15-digit decimal number.
        int carry = 2;
        for (int d = 14; d >= 0 && carry != 0; --d) {
            const int digit = current.bytes[d] - '0' + carry;
            current.bytes[d] = static_cast<char>('0' + digit % 10);
            carry = digit / 10;
        }
    }
}

} // namespace mx::bench::bsearch
