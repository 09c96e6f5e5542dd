#include "splitter.h"

#include <cctype>

namespace tunadb {

namespace {
enum class State : std::uint8_t {
    normal,
    single_quote,
    escape_quote, // E'...': a backslash escapes the next character (PostgreSQL's escape strings)
    double_quote,
    line_comment,
    block_comment,
    dollar_quote
};

bool is_utf8_continuation(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }
bool is_identifier_char(char c) noexcept {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '$' ||
           (static_cast<unsigned char>(c) & 0x80U) != 0;
}
} // namespace

SplitResult split_statements(std::string_view text, bool final, std::uint32_t line, std::uint32_t column) {
    SplitResult result;
    State state = State::normal;
    std::uint32_t block_depth = 0;
    std::string_view dollar_tag;
    std::size_t start = 0;
    std::uint32_t start_line = line;
    std::uint32_t start_column = column;
    bool has_content = false;
    std::uint32_t first_line = line;

    const auto finish = [&](std::size_t end) {
        if (has_content) {
            result.pieces.push_back(
                Piece{std::string{text.substr(start, end - start)}, start_line, start_column, first_line});
        }
    };

    std::size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        const char next = i + 1 < text.size() ? text[i + 1] : '\0';
        std::size_t advance = 1;
        switch (state) {
        case State::normal:
            if (c == ';') {
                finish(i);
                has_content = false;
                start = i + 1;
                start_line = line;
                start_column = column + 1;
                result.consumed = i + 1;
            } else if (c == '-' && next == '-') {
                state = State::line_comment;
                advance = 2;
            } else if (c == '/' && next == '*') {
                state = State::block_comment;
                block_depth = 1;
                advance = 2;
            } else if (std::isspace(static_cast<unsigned char>(c)) == 0) {
                if (!has_content) {
                    first_line = line;
                }
                has_content = true;
                if (c == '\'') {
                    // E'...' when the E starts a token (not the end of a name such as "same").
                    const bool escape = i > 0 && (text[i - 1] == 'E' || text[i - 1] == 'e') &&
                                        (i < 2 || !is_identifier_char(text[i - 2]));
                    state = escape ? State::escape_quote : State::single_quote;
                } else if (c == '"') {
                    state = State::double_quote;
                } else if (c == '$') {
                    // $tag$ ... $tag$ (tag may be empty); a lone $1 parameter is not a quote.
                    std::size_t j = i + 1;
                    while (j < text.size() &&
                           (std::isalnum(static_cast<unsigned char>(text[j])) != 0 || text[j] == '_') &&
                           std::isdigit(static_cast<unsigned char>(text[i + 1])) == 0) {
                        ++j;
                    }
                    if (j < text.size() && text[j] == '$') {
                        dollar_tag = text.substr(i, j + 1 - i);
                        state = State::dollar_quote;
                        advance = dollar_tag.size();
                    }
                }
            }
            break;
        case State::single_quote:
            if (c == '\'') {
                state = State::normal; // a doubled quote re-enters the literal at once
            }
            break;
        case State::escape_quote:
            if (c == '\\') {
                advance = 2; // the escaped character, whatever it is
            } else if (c == '\'' && next == '\'') {
                advance = 2; // a doubled quote stays inside
            } else if (c == '\'') {
                state = State::normal;
            }
            break;
        case State::double_quote:
            if (c == '"') {
                state = State::normal;
            }
            break;
        case State::line_comment:
            if (c == '\n') {
                state = State::normal;
            }
            break;
        case State::block_comment:
            if (c == '/' && next == '*') {
                ++block_depth;
                advance = 2;
            } else if (c == '*' && next == '/') {
                advance = 2;
                if (--block_depth == 0) {
                    state = State::normal;
                }
            }
            break;
        case State::dollar_quote:
            if (text.substr(i, dollar_tag.size()) == dollar_tag) {
                advance = dollar_tag.size();
                state = State::normal;
            }
            break;
        }
        for (std::size_t k = 0; k < advance && i < text.size(); ++k, ++i) {
            if (text[i] == '\n') {
                ++line;
                column = 1;
            } else if (!is_utf8_continuation(text[i])) {
                ++column;
            }
        }
    }
    if (final) {
        // An unterminated comment or quote at the end is a statement of its own, so that the
        // parser reports it instead of the text vanishing.
        if (state == State::block_comment && !has_content) {
            has_content = true;
            first_line = line;
        }
        finish(text.size());
        result.consumed = text.size();
    } else {
        // Inside a comment or quote the rest must wait for its end (a ';' in it splits nothing).
        result.rest_has_content = has_content || (state != State::normal && state != State::line_comment);
    }
    return result;
}

} // namespace tunadb
