#include "parser.h"

#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <sstream>
#include <utility>

#include <pg_query.h>

namespace mx::sql {

namespace {
std::string with_position(const std::string &message, std::uint32_t line, std::uint32_t column) {
    if (line == 0) {
        return message;
    }
    std::ostringstream out;
    out << message << " (line " << line << ", column " << column << ")";
    return out.str();
}
} // namespace

SqlError::SqlError(std::string message, std::uint32_t position, std::uint32_t line, std::uint32_t column)
    : std::runtime_error(with_position(message, line, column)), _message(std::move(message)),
      _position(position), _line(line), _column(column) {}

namespace detail {

namespace {

bool is_continuation_byte(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }

} // namespace

SqlError Source::error(std::string message, std::int64_t offset) const {
    if (offset < 0) {
        return SqlError(std::move(message));
    }
    const auto end =
        static_cast<std::size_t>(offset) < _text.size() ? static_cast<std::size_t>(offset) : _text.size();
    std::uint32_t character = 1;
    std::uint32_t line = 1;
    std::uint32_t column = 1;
    for (std::size_t i = 0; i < end; ++i) {
        if (is_continuation_byte(_text[i])) {
            continue;
        }
        ++character;
        if (_text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return SqlError(std::move(message), character, line, column);
}

SqlError Source::error_at_character(std::string message, std::uint32_t position) const {
    if (position == 0) {
        return SqlError(std::move(message));
    }
    // Byte offset of the position-th character (the end of the text if it is beyond).
    std::uint32_t character = 1;
    std::size_t offset = 0;
    while (offset < _text.size() && character < position) {
        ++offset;
        while (offset < _text.size() && is_continuation_byte(_text[offset])) {
            ++offset;
        }
        ++character;
    }
    return error(std::move(message), static_cast<std::int64_t>(offset));
}

namespace {

const Json &null_json() {
    static const Json null_value;
    return null_value;
}

/// Runs `function` on a thread with a stack of `stack_bytes` and waits for it: libpg_query's
/// parser and its JSON writer recurse once per nesting level, which a long chain of binary
/// operators makes as deep as the text is long.
template <class Function>
bool run_with_stack(std::size_t stack_bytes, Function &function) {
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0) {
        return false;
    }
    bool ok = pthread_attr_setstacksize(&attributes, stack_bytes) == 0;
    pthread_t thread{};
    auto trampoline = [](void *argument) -> void * {
        (*static_cast<Function *>(argument))();
        return nullptr;
    };
    ok = ok && pthread_create(&thread, &attributes, trampoline, &function) == 0;
    pthread_attr_destroy(&attributes);
    if (ok) {
        pthread_join(thread, nullptr);
    }
    return ok;
}

/// libpg_query 15-4.0 leaves the value out of the JSON of negative integer constants
/// ({"A_Const": {"ival": {}}}, fixed upstream later): read it back from the text at the
/// constant's location, where the grammar folded a unary minus into the constant.
void repair_integer(Json &body, std::string_view text) {
    Json &ival = body["ival"];
    if (!ival.is_object() || ival.contains("ival")) {
        return;
    }
    const std::int64_t location = int_field(body, "location", -1);
    if (location < 0 || static_cast<std::size_t>(location) >= text.size()) {
        return;
    }
    std::size_t i = static_cast<std::size_t>(location);
    bool negative = false;
    while (i < text.size()) {
        const char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            ++i;
        } else if (c == '-' && (i + 1 >= text.size() || text[i + 1] != '-')) {
            negative = !negative;
            ++i;
        } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
            const auto end = text.find("*/", i + 2);
            i = end == std::string_view::npos ? text.size() : end + 2;
        } else {
            break;
        }
    }
    std::int64_t value = 0;
    bool digits = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && value < (std::int64_t{1} << 40)) {
        value = value * 10 + (text[i] - '0');
        digits = true;
        ++i;
    }
    if (digits) {
        ival["ival"] = negative ? -value : value;
    }
}

/// Walks the whole tree without recursion (it may be deep) to repair integer constants.
void repair_tree(Json &root, std::string_view text) {
    std::vector<Json *> stack{&root};
    while (!stack.empty()) {
        Json *node = stack.back();
        stack.pop_back();
        if (node->is_object()) {
            for (auto it = node->begin(); it != node->end(); ++it) {
                if (it.key() == "A_Const" && it.value().is_object() && it.value().contains("ival")) {
                    repair_integer(it.value(), text);
                }
                if (it.value().is_structured()) {
                    stack.push_back(&it.value());
                }
            }
        } else if (node->is_array()) {
            for (auto &element : *node) {
                if (element.is_structured()) {
                    stack.push_back(&element);
                }
            }
        }
    }
}

} // namespace

std::vector<Statement> parse(const Source &source) {
    const std::string_view text = source.text();
    if (text.size() > max_text_bytes) {
        std::ostringstream message;
        message << "SQL text too long: " << text.size() << " bytes (at most " << max_text_bytes
                << "; load data with COPY)";
        throw SqlError(message.str());
    }
    if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
        throw source.error("SQL text contains a NUL byte", static_cast<std::int64_t>(nul));
    }
    const std::string input(text);
    struct Outcome {
        bool ok{false};
        std::string tree;
        std::string error;
        int cursor{0};
    } outcome;
    auto work = [&input, &outcome]() noexcept {
        PgQueryParseResult result = pg_query_parse(input.c_str());
        try {
            if (result.error != nullptr) {
                outcome.error = result.error->message != nullptr ? result.error->message : "syntax error";
                outcome.cursor = result.error->cursorpos;
            } else if (result.parse_tree != nullptr) {
                outcome.tree = result.parse_tree;
                outcome.ok = true;
            } else {
                outcome.error = "the parser returned nothing";
            }
        } catch (...) {
            outcome.error = "out of memory while parsing";
        }
        pg_query_free_parse_result(result);
        // The thread ends here, and libpg_query frees its per-thread memory context in a
        // thread-exit destructor (calling pg_query_exit() as well would free it twice).
    };
    const std::size_t stack_bytes = (std::size_t{16} << 20U) + input.size() * 192;
    if (!run_with_stack(stack_bytes, work)) {
        throw SqlError("cannot start the parser thread (out of memory?)");
    }
    if (!outcome.ok) {
        if (outcome.error.rfind("memory exhausted", 0) == 0) {
            outcome.error = "expression nested too deeply (the parser ran out of stack)";
        }
        throw source.error_at_character(outcome.error,
                                        outcome.cursor > 0 ? static_cast<std::uint32_t>(outcome.cursor) : 0);
    }
    Json tree = Json::parse(outcome.tree, nullptr, false);
    if (tree.is_discarded()) {
        throw SqlError("internal error: unreadable parse tree");
    }
    repair_tree(tree, text);
    std::vector<Statement> statements;
    for (auto &raw : tree["stmts"]) {
        Statement statement;
        statement.location = int_field(raw, "stmt_location");
        // Point at the statement's first word, not at the blank lines before it.
        while (static_cast<std::size_t>(statement.location) < text.size() &&
               std::isspace(static_cast<unsigned char>(text[static_cast<std::size_t>(statement.location)])) !=
                   0) {
            ++statement.location;
        }
        statement.length = int_field(raw, "stmt_len");
        statement.node = std::move(raw["stmt"]);
        statements.push_back(std::move(statement));
    }
    return statements;
}

std::string_view node_name(const Json &node) noexcept {
    if (!node.is_object() || node.size() != 1) {
        return {};
    }
    return node.begin().key();
}

const Json &node_body(const Json &node) {
    if (!node.is_object() || node.size() != 1) {
        return null_json();
    }
    return node.begin().value();
}

const Json &field(const Json &node, std::string_view key) {
    if (!node.is_object()) {
        return null_json();
    }
    const auto it = node.find(key);
    return it == node.end() ? null_json() : *it;
}

std::string string_field(const Json &node, std::string_view key) {
    const Json &value = field(node, key);
    return value.is_string() ? value.get<std::string>() : std::string();
}

std::int64_t int_field(const Json &node, std::string_view key, std::int64_t otherwise) {
    const Json &value = field(node, key);
    return value.is_number_integer() ? value.get<std::int64_t>() : otherwise;
}

bool bool_field(const Json &node, std::string_view key) {
    const Json &value = field(node, key);
    return value.is_boolean() && value.get<bool>();
}

std::int64_t location_of(const Json &node) {
    if (node.is_object() && node.contains("location")) {
        return int_field(node, "location", -1);
    }
    return int_field(node_body(node), "location", -1);
}

std::vector<const Json *> list_field(const Json &node, std::string_view key) {
    std::vector<const Json *> out;
    const Json &value = field(node, key);
    if (value.is_array()) {
        for (const auto &element : value) {
            out.push_back(&element);
        }
    }
    return out;
}

std::string string_value(const Json &node) {
    if (node_name(node) == "String") {
        return string_field(node_body(node), "sval");
    }
    return {};
}

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

} // namespace detail
} // namespace mx::sql
