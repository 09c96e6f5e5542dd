// LIKE pattern compilation and matching. Most patterns in practice (TPC-H: 'PROMO%', '%BRASS',
// '%green%', '%special%requests%') contain no '_' and reduce to substring searches; only patterns
// with '_' take the general backtracking matcher.

#include "expression_internal.h"

#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mx::db::detail {

std::size_t find_substring(std::string_view text, std::string_view needle, std::size_t from) noexcept {
    const std::size_t m = needle.size();
    const std::size_t n = text.size();
    if (from > n || n - from < m) {
        return std::string_view::npos;
    }
    if (m == 0) {
        return from;
    }
    const char *p = text.data();
    const char first = needle.front();
    const char last = needle.back();
    // Windows [i, i + m) for i in [from, n - m]; the inner bytes are compared only for
    // candidates whose first and last byte match.
    const auto inner_equal = [&](std::size_t i) {
        return m <= 2 || std::memcmp(p + i + 1, needle.data() + 1, m - 2) == 0;
    };
    std::size_t i = from;
#if defined(__SSE2__)
    const __m128i firsts = _mm_set1_epi8(first);
    const __m128i lasts = _mm_set1_epi8(last);
    // Candidates among the 16 windows from `at` whose bit is set in `keep`.
    const auto block = [&](std::size_t at, unsigned keep) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + at));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + at + m - 1));
        auto mask = static_cast<unsigned>(_mm_movemask_epi8(
                        _mm_and_si128(_mm_cmpeq_epi8(a, firsts), _mm_cmpeq_epi8(b, lasts)))) &
                    keep;
        while (mask != 0) {
            const std::size_t candidate = at + static_cast<std::size_t>(std::countr_zero(mask));
            if (inner_equal(candidate)) {
                return candidate;
            }
            mask &= mask - 1;
        }
        return std::string_view::npos;
    };
    if (n - m + 1 >= 16) {
        // 16 windows at a time while the last bytes of all 16 lie inside the text, then the
        // last 16 windows of the text, those before i masked out (TPC-H comments of 19 to 78
        // bytes leave up to 15 windows after the full blocks, and a search after an earlier
        // segment's match often starts fewer than 16 windows before the end).
        for (; i + m - 1 + 16 <= n; i += 16) {
            if (const std::size_t found = block(i, 0xFFFFU); found != std::string_view::npos) {
                return found;
            }
        }
        if (i + m <= n) {
            const std::size_t at = n - m + 1 - 16;
            return block(at, 0xFFFFU << (i - at));
        }
        return std::string_view::npos;
    }
#endif
    for (; i + m <= n; ++i) {
        if (p[i] == first && p[i + m - 1] == last && inner_equal(i)) {
            return i;
        }
    }
    return std::string_view::npos;
}

namespace {
bool is_continuation(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }

/// Index after the UTF-8 code point starting at `i`.
std::size_t next_code_point(std::string_view text, std::size_t i) noexcept {
    ++i;
    while (i < text.size() && is_continuation(text[i])) {
        ++i;
    }
    return i;
}
} // namespace

std::shared_ptr<const LikeMatcher> LikeMatcher::compile(std::string_view pattern,
                                                        std::optional<char> escape) {
    auto matcher = std::make_shared<LikeMatcher>();
    std::vector<Token> tokens;
    bool has_underscore = false;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (escape.has_value() && c == *escape) {
            if (i + 1 == pattern.size()) {
                // DuckDB: a pattern ending in the escape character matches nothing
                matcher->shape = Shape::never;
                return matcher;
            }
            tokens.push_back({false, false, pattern[++i]});
        } else if (c == '%') {
            if (tokens.empty() || !tokens.back().any_run) { // '%%' is '%'
                tokens.push_back({false, true, 0});
            }
        } else if (c == '_') {
            has_underscore = true;
            tokens.push_back({true, false, 0});
        } else {
            tokens.push_back({false, false, c});
        }
    }

    if (has_underscore) {
        matcher->shape = Shape::general;
        matcher->tokens = std::move(tokens);
        return matcher;
    }

    // Split the literal tokens into the segments between the '%'s.
    std::vector<std::string> parts(1);
    for (const Token &token : tokens) {
        if (token.any_run) {
            parts.emplace_back();
        } else {
            parts.back().push_back(token.byte);
        }
    }
    const bool starts_with_run = !tokens.empty() && tokens.front().any_run;
    const bool ends_with_run = !tokens.empty() && tokens.back().any_run;
    if (parts.size() == 1) {
        matcher->shape = Shape::exact;
        matcher->needle = std::move(parts.front());
    } else if (parts.size() == 2 && starts_with_run && ends_with_run) {
        matcher->shape = Shape::any; // '%'
    } else if (parts.size() == 2 && ends_with_run) {
        matcher->shape = Shape::prefix;
        matcher->needle = std::move(parts.front());
    } else if (parts.size() == 2 && starts_with_run) {
        matcher->shape = Shape::suffix;
        matcher->needle = std::move(parts.back());
    } else if (parts.size() == 3 && starts_with_run && ends_with_run) {
        matcher->shape = Shape::contains;
        matcher->needle = std::move(parts[1]);
    } else {
        matcher->shape = Shape::segments;
        matcher->anchored_start = !starts_with_run;
        matcher->anchored_end = !ends_with_run;
        matcher->segments = std::move(parts);
    }
    return matcher;
}

bool LikeMatcher::match(std::string_view text) const noexcept {
    switch (shape) {
    case Shape::never:
        return false;
    case Shape::any:
        return true;
    case Shape::exact:
        return text == needle;
    case Shape::prefix:
        return text.size() >= needle.size() && text.substr(0, needle.size()) == needle;
    case Shape::suffix:
        return text.size() >= needle.size() && text.substr(text.size() - needle.size()) == needle;
    case Shape::contains:
        return find_substring(text, needle) != std::string_view::npos;
    case Shape::segments: {
        // First and last segments are anchored unless the pattern starts/ends with '%' (then they
        // are empty); the middle ones are matched leftmost, which is optimal without '_'.
        std::size_t begin = 0;
        std::size_t end = text.size();
        const std::string &first = segments.front();
        const std::string &last = segments.back();
        if (anchored_start) {
            if (text.substr(0, first.size()) != first) {
                return false;
            }
            begin = first.size();
        }
        if (anchored_end) {
            if (end - begin < last.size() || text.substr(end - last.size()) != last) {
                return false;
            }
            end -= last.size();
        }
        const std::string_view middle = text.substr(begin, end - begin);
        std::size_t position = 0;
        for (std::size_t i = 1; i + 1 < segments.size(); ++i) {
            const std::size_t found = find_substring(middle, segments[i], position);
            if (found == std::string_view::npos) {
                return false;
            }
            position = found + segments[i].size();
        }
        return true;
    }
    case Shape::general: {
        // Classic wildcard matching: remember the last '%' and where it started matching; on a
        // mismatch let that '%' swallow one more code point and retry.
        std::size_t t = 0;
        std::size_t p = 0;
        std::size_t star = tokens.size();
        std::size_t star_text = 0;
        while (t < text.size()) {
            if (p < tokens.size() && !tokens[p].any_run &&
                (tokens[p].any_char || tokens[p].byte == text[t])) {
                t = tokens[p].any_char ? next_code_point(text, t) : t + 1;
                ++p;
            } else if (p < tokens.size() && tokens[p].any_run) {
                star = p++;
                star_text = t;
            } else if (star != tokens.size()) {
                p = star + 1;
                star_text = next_code_point(text, star_text);
                t = star_text;
            } else {
                return false;
            }
        }
        while (p < tokens.size() && tokens[p].any_run) {
            ++p;
        }
        return p == tokens.size();
    }
    }
    return false;
}

} // namespace mx::db::detail
