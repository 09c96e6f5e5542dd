// Expression binding: PostgreSQL expression nodes -> typed db::Expr trees over ColumnIds.

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <set>

#include "binder.h"

namespace mx::sql::detail {

namespace {

bool is_aggregate_name(const std::string &name) {
    return name == "count" || name == "sum" || name == "avg" || name == "min" || name == "max" ||
           name == "bool_and" || name == "bool_or" || name == "stddev" || name == "stddev_samp" ||
           name == "stddev_pop" || name == "variance" || name == "var_samp" || name == "var_pop" ||
           name == "median" || name == "quantile_cont" || name == "string_agg" || name == "group_concat";
}

/// The function name of a FuncCall without the pg_catalog qualifier, lower case.
std::string function_name(const Json &body) {
    const auto names = list_field(body, "funcname");
    return names.empty() ? std::string() : lower(string_value(*names.back()));
}

std::string operator_name(const Json &body) {
    const auto names = list_field(body, "name");
    return names.empty() ? std::string() : string_value(*names.back());
}

/// Restores the context's depth on scope exit.
class DepthGuard {
public:
    explicit DepthGuard(int &depth) noexcept : _depth(depth) { ++_depth; }
    ~DepthGuard() { --_depth; }
    DepthGuard(const DepthGuard &) = delete;
    DepthGuard &operator=(const DepthGuard &) = delete;

private:
    int &_depth;
};

/// The elements of a {"List": {"items": [...]}} node or of a plain array.
std::vector<const Json *> list_items(const Json &node) {
    if (node_name(node) == "List") {
        return list_field(node_body(node), "items");
    }
    std::vector<const Json *> out;
    if (node.is_array()) {
        for (const auto &element : node) {
            out.push_back(&element);
        }
    }
    return out;
}

bool contains_sublink(const Json &node, int depth) {
    if (depth > max_expression_depth) {
        return false;
    }
    if (node.is_object()) {
        if (node.contains("SubLink")) {
            return true;
        }
        for (const auto &item : node.items()) {
            if (item.value().is_structured() && contains_sublink(item.value(), depth + 1)) {
                return true;
            }
        }
    } else if (node.is_array()) {
        for (const auto &element : node) {
            if (contains_sublink(element, depth + 1)) {
                return true;
            }
        }
    }
    return false;
}

} // namespace

bool Binder::contains_window(const Json &node, int depth) {
    if (depth > max_expression_depth) {
        return false;
    }
    if (node.is_object()) {
        if (node_name(node) == "FuncCall" && field(node_body(node), "over").is_object()) {
            return true;
        }
        if (node_name(node) == "SubLink") {
            return false;
        }
        for (const auto &item : node.items()) {
            if (item.value().is_structured() && contains_window(item.value(), depth + 1)) {
                return true;
            }
        }
    } else if (node.is_array()) {
        for (const auto &element : node) {
            if (contains_window(element, depth + 1)) {
                return true;
            }
        }
    }
    return false;
}

bool Binder::contains_aggregate(const Json &node, int depth) {
    if (depth > max_expression_depth) {
        return false;
    }
    if (node.is_object()) {
        if (node_name(node) == "FuncCall" && is_aggregate_name(function_name(node_body(node))) &&
            !field(node_body(node), "over").is_object()) {
            return true;
        }
        if (node_name(node) == "SubLink") {
            return false;
        }
        for (const auto &item : node.items()) {
            if (item.value().is_structured() && contains_aggregate(item.value(), depth + 1)) {
                return true;
            }
        }
    } else if (node.is_array()) {
        for (const auto &element : node) {
            if (contains_aggregate(element, depth + 1)) {
                return true;
            }
        }
    }
    return false;
}

std::optional<db::ExprPtr> Binder::match_group(const db::ExprPtr &expression, const AggregateState &state) {
    for (std::size_t i = 0; i < state.groups.size(); ++i) {
        if (same_expression(*state.groups[i], *expression)) {
            return _columns.ref(state.group_ids[i]);
        }
    }
    return std::nullopt;
}

std::string Binder::column_name(const Json &node) {
    const std::string_view kind = node_name(node);
    const Json &body = node_body(node);
    if (kind == "ColumnRef") {
        const auto fields = list_field(body, "fields");
        return fields.empty() ? std::string("?column?") : string_value(*fields.back());
    }
    if (kind == "FuncCall") {
        return function_name(body);
    }
    if (kind == "TypeCast") {
        return column_name(field(body, "arg"));
    }
    if (kind == "CaseExpr") {
        return "case";
    }
    return "?column?";
}

db::ExprPtr Binder::checked(db::ExprPtr expression, std::int64_t location) {
    if (expression->kind() != db::ExprKind::constant && expression->is_constant_tree()) {
        // The factories keep a constant node unfolded when folding fails: report why now.
        try {
            return db::expr::constant(db::evaluate_constant(*expression));
        } catch (const db::EvalError &error) {
            fail(error.what(), location);
        }
    }
    return expression;
}

db::ExprPtr Binder::cast_literal(const Bound &literal, db::Type type) {
    try {
        return checked(db::expr::cast(literal.expr, type), literal.location);
    } catch (const db::TypeError &error) {
        fail(error.what(), literal.location);
    }
}

void Binder::coerce_literals(Bound &a, Bound &b) {
    if (a.string_literal && !b.string_literal && b.expr != nullptr &&
        b.expr->type().id != db::TypeId::varchar) {
        a.expr = cast_literal(a, b.expr->type());
        a.string_literal = false;
    } else if (b.string_literal && !a.string_literal && a.expr != nullptr &&
               a.expr->type().id != db::TypeId::varchar) {
        b.expr = cast_literal(b, a.expr->type());
        b.string_literal = false;
    }
}

db::ExprPtr Binder::compare(db::CompareOp op, Bound left, Bound right, std::int64_t location) {
    if (left.interval.has_value() || right.interval.has_value()) {
        fail("intervals cannot be compared", location);
    }
    coerce_literals(left, right);
    try {
        return db::expr::compare(op, left.expr, right.expr);
    } catch (const db::TypeError &error) {
        fail(error.what(), location);
    }
}

Bound Binder::arithmetic(db::ArithmeticOp op, Bound left, Bound right, std::int64_t location) {
    Bound result;
    result.location = location;
    if (left.interval.has_value() && right.interval.has_value()) {
        fail("arithmetic on two intervals is not supported", location);
    }
    try {
        if (right.interval.has_value() || left.interval.has_value()) {
            const bool interval_right = right.interval.has_value();
            Bound &date = interval_right ? left : right;
            const db::Interval interval = interval_right ? *right.interval : *left.interval;
            if (date.string_literal) {
                date.expr = cast_literal(date, db::Type::date());
            }
            if (op == db::ArithmeticOp::add) {
                result.expr = db::expr::add_interval(date.expr, interval);
            } else if (op == db::ArithmeticOp::subtract && interval_right) {
                result.expr = db::expr::subtract_interval(date.expr, interval);
            } else {
                fail("an interval can only be added to or subtracted from a date", location);
            }
            return result;
        }
        coerce_literals(left, right);
        result.expr = db::expr::arithmetic(op, left.expr, right.expr);
    } catch (const db::TypeError &error) {
        fail(error.what(), location);
    }
    return result;
}

db::Interval Binder::parse_interval(const std::string &text, std::int64_t mask, std::int64_t location) {
    // PostgreSQL's interval typmod bits (utils/datetime.h).
    constexpr std::int64_t month_bit = 1 << 1;
    constexpr std::int64_t year_bit = 1 << 2;
    constexpr std::int64_t day_bit = 1 << 3;
    constexpr std::int64_t full_range = 0x7FFF;
    auto number = [&](const std::string &digits) -> std::int64_t {
        errno = 0;
        char *end = nullptr;
        const long long value = std::strtoll(digits.c_str(), &end, 10);
        if (digits.empty() || end == nullptr || *end != '\0' || errno != 0 || value > 1000000 ||
            value < -1000000) {
            fail("invalid interval value: '" + text + "'", location);
        }
        return value;
    };
    if (mask >= 0 && mask != full_range) {
        std::string trimmed = text;
        trimmed.erase(0, trimmed.find_first_not_of(" \t"));
        trimmed.erase(trimmed.find_last_not_of(" \t") + 1);
        const std::int64_t value = number(trimmed);
        if (mask == year_bit) {
            return db::Interval::of_years(value);
        }
        if (mask == month_bit) {
            return db::Interval::of_months(value);
        }
        if (mask == day_bit) {
            return db::Interval::of_days(value);
        }
        fail("only YEAR, MONTH and DAY intervals are supported", location);
    }
    // '1 year 2 months', '90 days', '3 month'
    db::Interval interval;
    std::size_t i = 0;
    bool any = false;
    while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) {
            ++i;
        }
        if (i >= text.size()) {
            break;
        }
        std::size_t start = i;
        if (text[i] == '-' || text[i] == '+') {
            ++i;
        }
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
            ++i;
        }
        const std::int64_t value = number(text.substr(start, i - start));
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) {
            ++i;
        }
        start = i;
        while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])) != 0) {
            ++i;
        }
        const std::string unit = lower(text.substr(start, i - start));
        if (unit == "year" || unit == "years" || unit == "y") {
            interval.months += value * 12;
        } else if (unit == "month" || unit == "months" || unit == "mon" || unit == "mons") {
            interval.months += value;
        } else if (unit == "week" || unit == "weeks") {
            interval.days += value * 7;
        } else if (unit == "day" || unit == "days" || unit == "d" || unit.empty()) {
            interval.days += value;
        } else {
            fail("unsupported interval unit \"" + unit + "\" (years, months, weeks and days are supported)",
                 location);
        }
        any = true;
    }
    if (!any) {
        fail("invalid interval value: '" + text + "'", location);
    }
    return interval;
}

db::Type Binder::bind_type(const Json &type_name) {
    const auto names = list_field(type_name, "names");
    const std::int64_t location = int_field(type_name, "location", -1);
    const std::string name = names.empty() ? std::string() : lower(string_value(*names.back()));
    if (field(type_name, "arrayBounds").is_array()) {
        fail("array types are not supported", location);
    }
    std::vector<std::int64_t> modifiers;
    for (const Json *modifier : list_field(type_name, "typmods")) {
        const Json &body = node_body(*modifier);
        if (node_name(*modifier) != "A_Const" || !field(body, "ival").is_object()) {
            fail("type modifiers must be integer constants", location_of(*modifier));
        }
        modifiers.push_back(int_field(field(body, "ival"), "ival"));
    }
    auto length = [&](const char *what) -> std::uint32_t {
        if (modifiers.size() > 1) {
            fail(std::string(what) + " takes one length", location);
        }
        if (modifiers.empty()) {
            return 0;
        }
        if (modifiers[0] < 1 || modifiers[0] > 10485760) {
            fail(std::string("length for type ") + what + " must be between 1 and 10485760", location);
        }
        return static_cast<std::uint32_t>(modifiers[0]);
    };
    if (name == "int4" || name == "int" || name == "integer" || name == "int2" || name == "smallint") {
        return db::Type::integer();
    }
    if (name == "int8" || name == "bigint") {
        return db::Type::bigint();
    }
    if (name == "numeric" || name == "decimal") {
        if (modifiers.empty()) {
            return db::Type::decimal(18, 3); // DuckDB's default
        }
        if (modifiers.size() > 2) {
            fail("DECIMAL takes a precision and a scale", location);
        }
        const std::int64_t precision = modifiers[0];
        const std::int64_t scale = modifiers.size() > 1 ? modifiers[1] : 0;
        if (precision < 1 || precision > db::decimal::max_precision) {
            fail("DECIMAL precision " + std::to_string(precision) + " must be between 1 and 38", location);
        }
        if (scale < 0 || scale > precision) {
            fail("DECIMAL scale " + std::to_string(scale) + " must be between 0 and the precision", location);
        }
        return db::Type::decimal(static_cast<std::uint8_t>(precision), static_cast<std::uint8_t>(scale));
    }
    if (name == "float8" || name == "float4" || name == "float" || name == "double" || name == "real") {
        return db::Type::float64();
    }
    if (name == "date") {
        return db::Type::date();
    }
    if (name == "bpchar" || name == "char" || name == "character") {
        // CHAR(n) is VARCHAR(n) without blank padding, as in DuckDB.
        const std::uint32_t n = length("CHAR");
        return db::Type::varchar(n == 0 ? 1 : n);
    }
    if (name == "varchar" || name == "text" || name == "string") {
        return db::Type::varchar(length("VARCHAR"));
    }
    if (name == "bool" || name == "boolean") {
        return db::Type::boolean();
    }
    std::string shown = names.empty() ? std::string("?") : string_value(*names.back());
    if (shown == "int4" || shown == "int8" || shown == "float8") {
        shown = name;
    }
    fail("type \"" + shown +
             "\" is not supported (INTEGER, BIGINT, DECIMAL, DOUBLE, DATE, CHAR, VARCHAR, BOOLEAN are)",
         location);
}

Bound Binder::bind_constant_node(const Json &body) {
    Bound result;
    result.location = int_field(body, "location", -1);
    if (bool_field(body, "isnull")) {
        result.expr = db::expr::null(db::Type::integer());
        return result;
    }
    if (const Json &ival = field(body, "ival"); ival.is_object()) {
        const std::int64_t value = int_field(ival, "ival");
        result.expr = db::expr::constant(db::Value::integer(value));
        return result;
    }
    if (const Json &sval = field(body, "sval"); sval.is_object()) {
        result.expr = db::expr::constant(db::Value::varchar(string_field(sval, "sval")));
        result.string_literal = true;
        return result;
    }
    if (const Json &boolval = field(body, "boolval"); boolval.is_object()) {
        result.expr = db::expr::constant(db::Value::boolean(bool_field(boolval, "boolval")));
        return result;
    }
    if (const Json &fval = field(body, "fval"); fval.is_object()) {
        const std::string text = string_field(fval, "fval");
        const bool exponent = text.find_first_of("eE") != std::string::npos;
        const bool point = text.find('.') != std::string::npos;
        std::size_t digits = 0;
        std::size_t scale = 0;
        bool after_point = false;
        for (char c : text) {
            if (c == '.') {
                after_point = true;
            } else if (c >= '0' && c <= '9') {
                ++digits;
                scale += after_point ? 1 : 0;
            }
        }
        if (!exponent && !point) {
            // An integer beyond INTEGER: BIGINT, or DECIMAL(38,0) beyond that (DuckDB: HUGEINT).
            errno = 0;
            char *end = nullptr;
            const long long value = std::strtoll(text.c_str(), &end, 10);
            if (errno == 0 && end != nullptr && *end == '\0') {
                result.expr = db::expr::constant(db::Value::bigint(value));
                return result;
            }
            if (digits <= db::decimal::max_precision) {
                const auto parsed = db::decimal::parse(text, db::decimal::max_precision, 0);
                if (parsed.has_value()) {
                    result.expr =
                        db::expr::constant(db::Value::decimal(*parsed, db::decimal::max_precision, 0));
                    return result;
                }
            }
        } else if (!exponent && digits <= db::decimal::max_precision && digits >= 1) {
            // DuckDB: a decimal literal is DECIMAL(number of digits, digits after the point).
            const auto precision = static_cast<std::uint8_t>(std::max(digits, std::size_t{1}));
            const auto parsed = db::decimal::parse(text, precision, static_cast<std::uint8_t>(scale));
            if (parsed.has_value()) {
                result.expr = db::expr::constant(
                    db::Value::decimal(*parsed, precision, static_cast<std::uint8_t>(scale)));
                return result;
            }
        }
        errno = 0;
        char *end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == nullptr || *end != '\0' || !std::isfinite(value)) {
            fail("numeric constant out of range: " + text, result.location);
        }
        result.expr = db::expr::constant(db::Value::float64(value));
        return result;
    }
    if (field(body, "bsval").is_object()) {
        fail("bit string constants are not supported", result.location);
    }
    fail("unsupported constant", result.location);
}

Bound Binder::bind_column_ref(const Json &body, Context &context) {
    const std::int64_t location = int_field(body, "location", -1);
    const auto fields = list_field(body, "fields");
    std::vector<std::string> parts;
    for (const Json *part : fields) {
        if (node_name(*part) == "A_Star") {
            fail("\"*\" is only allowed in the select list and in count(*)", location);
        }
        parts.push_back(string_value(*part));
    }
    if (parts.empty() || parts.size() > 2) {
        fail("column references with schemas are not supported", location);
    }
    const std::string column = parts.back();
    const std::string qualifier = parts.size() == 2 ? parts[0] : std::string();
    std::string shown = qualifier.empty() ? column : qualifier + "." + column;
    if (context.scope == nullptr) {
        fail(std::string("column references are not allowed in ") + context.clause + ": \"" + shown + "\"",
             location);
    }
    int level = 0;
    bool qualifier_found = false;
    for (Scope *scope = context.scope; scope != nullptr; scope = scope->parent, ++level) {
        std::optional<ColumnId> found;
        for (const auto &entry : scope->entries) {
            if (!qualifier.empty() && !equal_names(entry.alias, qualifier)) {
                continue;
            }
            qualifier_found = qualifier_found || !qualifier.empty();
            for (std::size_t i = 0; i < entry.names.size(); ++i) {
                if (!equal_names(entry.names[i], column) || (qualifier.empty() && entry.is_hidden(i))) {
                    continue;
                }
                const ColumnId id = qualifier.empty() ? entry.unqualified_id(i) : entry.ids[i];
                if (found.has_value() && *found != id) {
                    fail("column reference \"" + shown + "\" is ambiguous", location);
                }
                found = id;
            }
        }
        if (!found.has_value()) {
            if (qualifier_found) {
                fail("column \"" + shown + "\" does not exist", location);
            }
            continue;
        }
        if (level == 1) {
            if (!context.scope->outer_allowed) {
                fail("correlated reference to \"" + shown + "\" is only supported in WHERE", location);
            }
            auto &outer = context.scope->outer_references;
            if (std::find(outer.begin(), outer.end(), *found) == outer.end()) {
                outer.push_back(*found);
            }
        } else if (level > 1) {
            fail("correlated reference to \"" + shown + "\" two or more query levels up is not supported",
                 location);
        }
        Bound result;
        result.expr = _columns.ref(*found);
        result.location = location;
        return result;
    }
    if (!qualifier.empty()) {
        fail("missing FROM-clause entry for table \"" + qualifier + "\"", location);
    }
    fail("column \"" + shown + "\" does not exist", location);
}

Bound Binder::bind_case(const Json &body, Context &context) {
    const std::int64_t location = int_field(body, "location", -1);
    const Json &argument = field(body, "arg");
    std::optional<Bound> operand;
    if (!argument.is_null()) {
        operand = bind(argument, context);
    }
    std::vector<Bound> results;
    std::vector<db::ExprPtr> conditions;
    for (const Json *when : list_field(body, "args")) {
        const Json &branch = node_body(*when);
        Bound condition = bind(field(branch, "expr"), context);
        if (operand.has_value()) {
            conditions.push_back(compare(db::CompareOp::equal, *operand, condition, location_of(*when)));
        } else {
            if (condition.interval.has_value() || condition.expr->type().id != db::TypeId::boolean) {
                if (!condition.expr->value().null || condition.expr->kind() != db::ExprKind::constant) {
                    fail("argument of CASE/WHEN must be type BOOLEAN, not type " +
                             (condition.interval ? std::string("INTERVAL")
                                                 : condition.expr->type().to_string()),
                         location_of(field(branch, "expr")));
                }
                condition.expr = db::expr::null(db::Type::boolean());
            }
            conditions.push_back(condition.expr);
        }
        results.push_back(bind(field(branch, "result"), context));
    }
    std::optional<Bound> otherwise;
    if (!field(body, "defresult").is_null()) {
        otherwise = bind(field(body, "defresult"), context);
    }
    // String literals among non-string results take the results' type.
    std::optional<db::Type> typed;
    auto consider = [&](const Bound &b) {
        if (!b.string_literal && !b.interval &&
            !(b.expr->kind() == db::ExprKind::constant && b.expr->value().null)) {
            typed = typed.has_value() ? *typed : b.expr->type();
        }
    };
    for (const auto &r : results) {
        consider(r);
    }
    if (otherwise) {
        consider(*otherwise);
    }
    auto finish = [&](Bound &b) -> db::ExprPtr {
        if (b.interval.has_value()) {
            fail("CASE cannot return an interval", b.location);
        }
        if (b.string_literal && typed.has_value() && typed->id != db::TypeId::varchar) {
            return cast_literal(b, *typed);
        }
        return b.expr;
    };
    std::vector<std::pair<db::ExprPtr, db::ExprPtr>> branches;
    for (std::size_t i = 0; i < results.size(); ++i) {
        branches.emplace_back(conditions[i], finish(results[i]));
    }
    db::ExprPtr else_expression = otherwise.has_value() ? finish(*otherwise) : nullptr;
    Bound result;
    result.location = location;
    try {
        result.expr = db::expr::case_when(std::move(branches), std::move(else_expression));
    } catch (const db::TypeError &error) {
        fail(error.what(), location);
    }
    return result;
}

Bound Binder::bind_type_cast(const Json &body, Context &context) {
    const Json &type_name = field(body, "typeName");
    const std::int64_t location = int_field(type_name, "location", int_field(body, "location", -1));
    const auto names = list_field(type_name, "names");
    const std::string name = names.empty() ? std::string() : lower(string_value(*names.back()));
    const Json &argument = field(body, "arg");
    if (name == "interval") {
        const Json &constant = node_body(argument);
        if (node_name(argument) != "A_Const" ||
            (!field(constant, "sval").is_object() && !field(constant, "ival").is_object())) {
            fail("only constant intervals such as INTERVAL '3' MONTH are supported", location);
        }
        std::string text = field(constant, "sval").is_object()
                               ? string_field(field(constant, "sval"), "sval")
                               : std::to_string(int_field(field(constant, "ival"), "ival"));
        std::int64_t mask = -1;
        const auto modifiers = list_field(type_name, "typmods");
        if (!modifiers.empty()) {
            mask = int_field(field(node_body(*modifiers[0]), "ival"), "ival");
        }
        Bound result;
        result.interval = parse_interval(text, mask, int_field(constant, "location", location));
        result.location = location;
        return result;
    }
    const db::Type type = bind_type(type_name);
    Bound operand = bind(argument, context);
    if (operand.interval.has_value()) {
        fail("intervals cannot be cast", location);
    }
    Bound result;
    result.location = operand.location >= 0 ? operand.location : location;
    if (operand.string_literal) {
        result.expr = cast_literal(operand, type);
        return result;
    }
    try {
        result.expr = checked(db::expr::cast(operand.expr, type), location);
    } catch (const db::TypeError &error) {
        fail(error.what(), location);
    }
    return result;
}

Bound Binder::bind_aggregate(const std::string &name, const Json &body, Context &context) {
    const std::int64_t location = int_field(body, "location", -1);
    if (context.aggregates == nullptr) {
        fail("aggregate functions are not allowed in " + std::string(context.clause), location);
    }
    if (bool_field(body, "agg_within_group") ||
        (field(body, "agg_order").is_array() && name != "string_agg" && name != "group_concat")) {
        fail("WITHIN GROUP and ORDER BY in aggregates are not supported (except string_agg(x ORDER BY x))",
             location);
    }
    // FILTER (WHERE c): the aggregate sees CASE WHEN c THEN argument END, which is NULL (and so
    // skipped) on the rows c does not accept; count(*) counts CASE WHEN c THEN 1 END.
    db::ExprPtr filter;
    if (const Json &filter_node = field(body, "agg_filter"); filter_node.is_object()) {
        Context inner = context;
        inner.aggregates = nullptr;
        inner.windows = nullptr;
        inner.after_aggregate = false;
        inner.clause = "FILTER";
        filter = null_as_boolean(bind_value(filter_node, inner));
        if (filter->type().id != db::TypeId::boolean) {
            fail("argument of FILTER must be type BOOLEAN, not type " + filter->type().to_string(),
                 location_of(filter_node));
        }
    }
    const auto filtered = [&](db::ExprPtr value) {
        return filter == nullptr ? value : db::expr::case_when({{filter, std::move(value)}});
    };
    const auto arguments = list_field(body, "args");
    const bool star = bool_field(body, "agg_star");
    const bool distinct = bool_field(body, "agg_distinct");
    db::AggregateFunction function{};
    db::ExprPtr argument;
    double quantile = 0.5;
    std::string separator = ",";
    int order = 0;
    if (star) {
        if (name != "count") {
            fail(name + "(*) is not valid: only count(*) is", location);
        }
        function = db::AggregateFunction::count_star;
        if (filter != nullptr) {
            function = db::AggregateFunction::count;
            argument = filtered(db::expr::constant(db::Value::integer(1)));
        }
    } else {
        double fraction = 0.5;
        if (name == "quantile_cont") {
            if (arguments.size() != 2) {
                fail("quantile_cont takes a value and a constant fraction", location);
            }
            Context plain;
            plain.clause = "the fraction of quantile_cont";
            const db::ExprPtr value = bind_value(*arguments[1], plain);
            if (value->kind() != db::ExprKind::constant || value->value().null ||
                !value->type().is_numeric()) {
                fail("the fraction of quantile_cont must be a numeric constant", location_of(*arguments[1]));
            }
            fraction = db::evaluate_constant(*db::expr::cast(value, db::Type::float64())).f64;
            if (!(fraction >= 0.0 && fraction <= 1.0)) {
                fail("the fraction of quantile_cont must be between 0 and 1", location_of(*arguments[1]));
            }
        } else if (name == "string_agg" || name == "group_concat") {
            if (arguments.empty() || arguments.size() > 2) {
                fail(name + " takes a value and an optional separator", location);
            }
            if (arguments.size() == 2) {
                Context plain;
                plain.clause = "the separator of string_agg";
                const db::ExprPtr value = bind_value(*arguments[1], plain);
                if (value->kind() != db::ExprKind::constant || value->value().null ||
                    value->type().id != db::TypeId::varchar) {
                    fail("the separator of " + name + " must be a string constant",
                         location_of(*arguments[1]));
                }
                separator = value->value().str;
            }
        } else if (arguments.size() != 1) {
            fail("function " + name + " takes exactly one argument", location);
        }
        quantile = fraction;
        Context inner = context;
        inner.aggregates = nullptr;
        inner.windows = nullptr;
        inner.after_aggregate = false;
        inner.clause = "the argument of an aggregate function";
        Bound bound = bind(*arguments[0], inner);
        if (bound.interval.has_value()) {
            fail("aggregates of intervals are not supported", bound.location);
        }
        argument = filtered(bound.expr);
        const db::Type type = argument->type();
        if (name == "count") {
            function = distinct ? db::AggregateFunction::count_distinct : db::AggregateFunction::count;
        } else {
            // min, max, bool_and and bool_or give the same answer over the distinct values.
            // stddev and variance are computed in DOUBLE from Welford's running moments.
            if (name == "bool_and" || name == "bool_or") {
                // Over BOOLEAN, false < true: bool_and is min, bool_or is max.
                if (type.id != db::TypeId::boolean) {
                    fail("function " + name + "(" + type.to_string() + ") does not exist", location);
                }
                function = name == "bool_and" ? db::AggregateFunction::min : db::AggregateFunction::max;
            } else if (name == "string_agg" || name == "group_concat") {
                if (distinct) {
                    fail(name + "(DISTINCT ...) is not supported", location);
                }
                argument = db::expr::cast(argument, db::Type::varchar());
                function = db::AggregateFunction::string_agg;
                // ORDER BY: only the value itself, ascending or descending (sorted when the
                // group is finished).
                const auto keys = list_field(body, "agg_order");
                if (keys.size() > 1) {
                    fail(name + "(... ORDER BY ...) supports one key, the value itself", location);
                }
                if (keys.size() == 1) {
                    const Json &sort_by = node_body(*keys[0]);
                    Bound key = bind(field(sort_by, "node"), inner);
                    if (key.interval.has_value() || !same_expression(*key.expr, *bound.expr)) {
                        fail(name + "(... ORDER BY ...) supports only the aggregated value as the key",
                             location_of(field(sort_by, "node")));
                    }
                    order = string_field(sort_by, "sortby_dir") == "SORTBY_DESC" ? -1 : 1;
                }
            } else if (name == "median" || name == "quantile_cont") {
                // DuckDB: DOUBLE for integers and doubles, the argument's type for DECIMALs.
                if (!type.is_numeric()) {
                    fail("function " + name + "(" + type.to_string() + ") does not exist", location);
                }
                if (distinct) {
                    fail(name + "(DISTINCT ...) is not supported", location);
                }
                if (type.id != db::TypeId::decimal) {
                    argument = db::expr::cast(argument, db::Type::float64());
                }
                function = db::AggregateFunction::quantile_cont;
            } else if (name.starts_with("stddev") || name.starts_with("var")) {
                if (!type.is_numeric()) {
                    fail("function " + name + "(" + type.to_string() + ") does not exist", location);
                }
                if (distinct) {
                    fail(name + "(DISTINCT ...) is not supported", location);
                }
                argument = db::expr::cast(argument, db::Type::float64());
                function = name == "stddev" || name == "stddev_samp" ? db::AggregateFunction::stddev_samp
                           : name == "stddev_pop"                    ? db::AggregateFunction::stddev_pop
                           : name == "var_pop"                       ? db::AggregateFunction::var_pop
                                                                     : db::AggregateFunction::var_samp;
            } else if (name == "sum" || name == "avg") {
                if (!type.is_numeric()) {
                    fail("function " + name + "(" + type.to_string() + ") does not exist", location);
                }
                function =
                    name == "sum"
                        ? (distinct ? db::AggregateFunction::sum_distinct : db::AggregateFunction::sum)
                        : (distinct ? db::AggregateFunction::avg_distinct : db::AggregateFunction::avg);
            } else {
                function = name == "min" ? db::AggregateFunction::min : db::AggregateFunction::max;
            }
        }
    }
    auto &state = *context.aggregates;
    for (const auto &existing : state.aggregates) {
        const bool same_argument = (existing.argument == nullptr && argument == nullptr) ||
                                   (existing.argument != nullptr && argument != nullptr &&
                                    same_expression(*existing.argument, *argument));
        if (existing.function == function && same_argument && existing.fraction == quantile &&
            existing.separator == separator && existing.order == order) {
            Bound result;
            result.expr = _columns.ref(existing.output);
            result.location = location;
            return result;
        }
    }
    db::Type type;
    try {
        type =
            db::plan::aggregate_type(function, argument != nullptr ? argument->type() : db::Type::bigint());
    } catch (const std::exception &error) {
        fail(error.what(), location);
    }
    const bool counts = function == db::AggregateFunction::count_star ||
                        function == db::AggregateFunction::count ||
                        function == db::AggregateFunction::count_distinct;
    std::string shown = name;
    shown.append(star ? "(*)" : "(").append(star ? "" : db::to_string(*argument)).append(star ? "" : ")");
    const ColumnId output = _columns.add(shown, type, !counts);
    state.aggregates.push_back(LogicalAggregate{function, argument, output, quantile, separator, order});
    Bound result;
    result.expr = _columns.ref(output);
    result.location = location;
    return result;
}

Bound Binder::bind_window(const std::string &name, const Json &body, Context &context) {
    const std::int64_t location = int_field(body, "location", -1);
    if (context.windows == nullptr) {
        fail("window functions are not allowed in " + std::string(context.clause), location);
    }
    const Json &over = field(body, "over");
    if (!string_field(over, "name").empty() || !string_field(over, "refname").empty()) {
        fail("named windows (WINDOW w AS ...) are not supported", location);
    }
    if (bool_field(body, "agg_distinct")) {
        fail("DISTINCT is not supported in window functions", location);
    }
    if (field(body, "agg_filter").is_object() || field(body, "agg_order").is_array() ||
        bool_field(body, "agg_within_group")) {
        fail("FILTER and ORDER BY are not supported in window functions", location);
    }
    // Keys and arguments see the block like the select list does (group keys and aggregates in
    // an aggregate query); window functions inside them are an error.
    Context inner = context;
    inner.windows = nullptr;
    inner.clause = "the arguments of a window function";
    BoundWindow window;
    for (const Json *key : list_field(over, "partitionClause")) {
        window.partition.push_back(bind_value(*key, inner));
    }
    for (const Json *sort : list_field(over, "orderClause")) {
        const Json &sort_body = node_body(*sort);
        window.order.push_back(bind_value(field(sort_body, "node"), inner));
        LogicalSortKey key;
        key.descending = string_field(sort_body, "sortby_dir") == "SORTBY_DESC";
        const std::string nulls = string_field(sort_body, "sortby_nulls");
        if (nulls == "SORTBY_NULLS_FIRST") {
            key.nulls_first = true;
        } else if (nulls == "SORTBY_NULLS_LAST") {
            key.nulls_first = false;
        }
        window.order_keys.push_back(key);
    }
    // Frame (PostgreSQL's FRAMEOPTION_* bits).
    const std::int64_t options = int_field(over, "frameOptions", 0);
    constexpr std::int64_t nondefault = 0x1, range = 0x2, rows = 0x4, groups = 0x8;
    constexpr std::int64_t start_unbounded_preceding = 0x20, start_unbounded_following = 0x80,
                           end_unbounded_preceding = 0x40, end_unbounded_following = 0x100,
                           start_current = 0x200, end_current = 0x400, start_preceding = 0x800,
                           end_preceding = 0x1000, start_following = 0x2000, end_following = 0x4000,
                           excludes = 0x8000 | 0x10000 | 0x20000;
    if ((options & nondefault) != 0) {
        if ((options & groups) != 0) {
            fail("GROUPS frames are not supported", location);
        }
        if ((options & excludes) != 0) {
            fail("EXCLUDE in window frames is not supported", location);
        }
        window.rows = (options & rows) != 0;
        if ((options & range) != 0 &&
            (options & (start_preceding | end_preceding | start_following | end_following)) != 0) {
            fail("RANGE frames with offsets are not supported (use ROWS)", location);
        }
        auto offset_of = [&](const char *which) -> std::uint64_t {
            Context constant;
            constant.clause = "a window frame offset";
            const Json &node = field(over, which);
            db::ExprPtr value = bind_value(node, constant);
            if (value->kind() != db::ExprKind::constant || value->value().null ||
                (value->type().id != db::TypeId::integer && value->type().id != db::TypeId::bigint)) {
                fail("window frame offsets must be integer constants", location_of(node));
            }
            if (value->value().i64 < 0) {
                fail("window frame offsets must not be negative", location_of(node));
            }
            return static_cast<std::uint64_t>(value->value().i64);
        };
        using Kind = db::FrameBoundKind;
        if ((options & start_unbounded_preceding) != 0) {
            window.start = {Kind::unbounded_preceding, 0};
        } else if ((options & start_current) != 0) {
            window.start = {Kind::current_row, 0};
        } else if ((options & start_preceding) != 0) {
            window.start = {Kind::preceding, offset_of("startOffset")};
        } else if ((options & start_following) != 0) {
            window.start = {Kind::following, offset_of("startOffset")};
        } else if ((options & start_unbounded_following) != 0) {
            fail("frame start cannot be UNBOUNDED FOLLOWING", location);
        }
        if ((options & end_unbounded_following) != 0) {
            window.end = {Kind::unbounded_following, 0};
        } else if ((options & end_current) != 0) {
            window.end = {Kind::current_row, 0};
        } else if ((options & end_preceding) != 0) {
            window.end = {Kind::preceding, offset_of("endOffset")};
        } else if ((options & end_following) != 0) {
            window.end = {Kind::following, offset_of("endOffset")};
        } else if ((options & end_unbounded_preceding) != 0) {
            fail("frame end cannot be UNBOUNDED PRECEDING", location);
        }
    }

    const auto arguments = list_field(body, "args");
    const bool star = bool_field(body, "agg_star");
    auto expect_arguments = [&](std::size_t low, std::size_t high) {
        if (arguments.size() < low || arguments.size() > high) {
            fail("wrong number of arguments for window function " + name, location);
        }
    };
    using Function = db::WindowFunction;
    if (name == "row_number" || name == "rank" || name == "dense_rank") {
        expect_arguments(0, 0);
        window.function = name == "row_number" ? Function::row_number
                          : name == "rank"     ? Function::rank
                                               : Function::dense_rank;
    } else if (name == "ntile") {
        expect_arguments(1, 1);
        window.function = Function::ntile;
        window.argument = bind_value(*arguments[0], inner);
        if (window.argument->type().id != db::TypeId::integer &&
            window.argument->type().id != db::TypeId::bigint) {
            fail("ntile needs an integer argument", location);
        }
        window.argument = db::expr::cast(window.argument, db::Type::bigint());
    } else if (name == "lag" || name == "lead") {
        expect_arguments(1, 3);
        window.function = name == "lag" ? Function::lag : Function::lead;
        window.argument = bind_value(*arguments[0], inner);
        if (arguments.size() >= 2) {
            db::ExprPtr offset = bind_value(*arguments[1], inner);
            if (offset->kind() != db::ExprKind::constant ||
                (offset->type().id != db::TypeId::integer && offset->type().id != db::TypeId::bigint)) {
                fail(name + " supports only a constant integer offset", location_of(*arguments[1]));
            }
            window.offset = offset->value().null ? 1 : offset->value().i64;
            if (offset->value().null) {
                fail(name + " offset must not be NULL", location_of(*arguments[1]));
            }
        }
        if (arguments.size() == 3) {
            Bound fallback = bind(*arguments[2], inner);
            try {
                window.default_value = fallback.string_literal
                                           ? cast_literal(fallback, window.argument->type())
                                           : checked(db::expr::cast(fallback.expr, window.argument->type()),
                                                     location_of(*arguments[2]));
            } catch (const db::TypeError &error) {
                fail(error.what(), location_of(*arguments[2]));
            }
        }
    } else if (name == "first_value" || name == "last_value") {
        expect_arguments(1, 1);
        window.function = name == "first_value" ? Function::first_value : Function::last_value;
        window.argument = bind_value(*arguments[0], inner);
    } else if (name == "count" || name == "sum" || name == "avg" || name == "min" || name == "max") {
        if (star) {
            window.function = Function::count_star;
        } else {
            expect_arguments(1, 1);
            window.argument = bind_value(*arguments[0], inner);
            window.function = name == "count" ? Function::count
                              : name == "sum" ? Function::sum
                              : name == "avg" ? Function::avg
                              : name == "min" ? Function::min
                                              : Function::max;
        }
    } else {
        fail("window function " + name + " is not supported", location);
    }
    db::Type type;
    try {
        type = db::plan::window_type(window.function, window.argument != nullptr ? window.argument->type()
                                                                                 : db::Type::bigint());
    } catch (const std::exception &error) {
        fail(error.what(), location);
    }
    const bool never_null = window.function == Function::row_number || window.function == Function::rank ||
                            window.function == Function::dense_rank ||
                            window.function == Function::count_star || window.function == Function::count;
    std::string shown = name;
    shown.append(star ? "(*)" : "(")
        .append(star || window.argument == nullptr ? "" : db::to_string(*window.argument))
        .append(star ? "" : ")")
        .append(" OVER (...)");
    window.output = _columns.add(shown, type, !never_null);
    context.windows->push_back(window);
    Bound result;
    result.expr = _columns.ref(window.output);
    result.location = location;
    return result;
}

Bound Binder::bind_function(const Json &body, Context &context) {
    const std::string name = function_name(body);
    const std::int64_t location = int_field(body, "location", -1);
    if (field(body, "over").is_object()) {
        return bind_window(name, body, context);
    }
    if (is_aggregate_name(name)) {
        return bind_aggregate(name, body, context);
    }
    if (bool_field(body, "agg_star") || bool_field(body, "agg_distinct")) {
        fail("function " + name + " is not an aggregate", location);
    }
    const auto arguments = list_field(body, "args");
    Bound result;
    result.location = location;
    if (name == "extract" || name == "date_part") {
        if (arguments.size() != 2 || node_name(*arguments[0]) != "A_Const" ||
            !field(node_body(*arguments[0]), "sval").is_object()) {
            fail("EXTRACT needs a field name and a date", location);
        }
        const std::string part = lower(string_field(field(node_body(*arguments[0]), "sval"), "sval"));
        const auto parsed = db::parse_date_part(part);
        if (!parsed.has_value() || *parsed == db::DatePart::era) {
            fail("EXTRACT(" + part +
                     " ...) is not supported (year, quarter, month, week, day, dow, isodow, doy, isoyear, "
                     "yearweek, "
                     "decade, century, millennium, hour, minute, second, millisecond, microsecond, epoch, "
                     "julian "
                     "are)",
                 location);
        }
        const db::DatePart date_part = *parsed;
        Bound operand = bind(*arguments[1], context);
        if (operand.interval.has_value()) {
            fail("EXTRACT from an interval is not supported", location);
        }
        if (operand.string_literal) {
            operand.expr = cast_literal(operand, db::Type::date());
        }
        try {
            result.expr = db::expr::extract(date_part, operand.expr);
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (name == "substring" || name == "substr") {
        if (arguments.size() < 2 || arguments.size() > 3) {
            fail("SUBSTRING takes a string, a start and an optional length", location);
        }
        std::vector<db::ExprPtr> operands;
        for (const Json *argument : arguments) {
            Bound bound = bind(*argument, context);
            if (bound.interval.has_value()) {
                fail("SUBSTRING of an interval is not supported", location);
            }
            operands.push_back(bound.expr);
        }
        try {
            result.expr =
                db::expr::substring(operands[0], operands[1], operands.size() > 2 ? operands[2] : nullptr);
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (name == "coalesce") {
        std::vector<db::ExprPtr> operands;
        for (const Json *argument : arguments) {
            operands.push_back(bind_value(*argument, context));
        }
        try {
            result.expr = db::expr::coalesce(std::move(operands));
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    static const std::pair<const char *, db::Function> scalar_functions[] = {
        {"upper", db::Function::upper},
        {"ucase", db::Function::upper},
        {"lower", db::Function::lower},
        {"lcase", db::Function::lower},
        {"length", db::Function::length},
        {"len", db::Function::length},
        {"char_length", db::Function::length},
        {"character_length", db::Function::length},
        {"trim", db::Function::trim},
        {"btrim", db::Function::trim},
        {"ltrim", db::Function::ltrim},
        {"rtrim", db::Function::rtrim},
        {"replace", db::Function::replace},
        {"concat", db::Function::concat},
        {"starts_with", db::Function::starts_with},
        {"regexp_matches", db::Function::regexp_matches},
        {"abs", db::Function::abs},
        {"ceil", db::Function::ceil},
        {"ceiling", db::Function::ceil},
        {"floor", db::Function::floor},
        {"round", db::Function::round},
        {"sqrt", db::Function::sqrt},
        {"power", db::Function::power},
        {"pow", db::Function::power},
        {"ln", db::Function::ln},
        {"exp", db::Function::exp},
        {"greatest", db::Function::greatest},
        {"least", db::Function::least},
        {"date_trunc", db::Function::date_trunc},
        {"datetrunc", db::Function::date_trunc},
        {"strftime", db::Function::strftime},
    };
    for (const auto &[function_name_text, function] : scalar_functions) {
        if (name != function_name_text) {
            continue;
        }
        std::vector<db::ExprPtr> operands;
        for (std::size_t i = 0; i < arguments.size(); ++i) {
            Bound bound = bind(*arguments[i], context);
            if (bound.interval.has_value()) {
                fail("interval values are supported only in date arithmetic", location_of(*arguments[i]));
            }
            // A string literal where a date is expected is a date (date_trunc('month', '1992-02-09')).
            const bool date_position = (function == db::Function::date_trunc && i == 1) ||
                                       (function == db::Function::strftime && i == 0);
            if (bound.string_literal && date_position) {
                bound.expr = cast_literal(bound, db::Type::date());
            }
            operands.push_back(bound.expr);
        }
        try {
            result.expr = db::expr::function(function, std::move(operands));
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (name == "nullif") {
        if (arguments.size() != 2) {
            fail("nullif() takes 2 arguments", location);
        }
        Bound left = bind(*arguments[0], context);
        Bound right = bind(*arguments[1], context);
        const db::ExprPtr value = left.expr;
        db::ExprPtr equal = compare(db::CompareOp::equal, left, right, location);
        try {
            result.expr = db::expr::case_when({{equal, db::expr::null(value->type())}}, value);
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    fail("function " + name + "() is not supported", location);
}

namespace {

/// NOT (x op y) for non-NULL operands: x ALL (op) S is NOT (x ANY (negated op) S).
db::CompareOp negated(db::CompareOp op) noexcept {
    switch (op) {
    case db::CompareOp::equal:
        return db::CompareOp::not_equal;
    case db::CompareOp::not_equal:
        return db::CompareOp::equal;
    case db::CompareOp::less:
        return db::CompareOp::greater_equal;
    case db::CompareOp::less_equal:
        return db::CompareOp::greater;
    case db::CompareOp::greater:
        return db::CompareOp::less_equal;
    case db::CompareOp::greater_equal:
        return db::CompareOp::less;
    }
    return op;
}

/// CASE WHEN matched THEN TRUE WHEN unknown THEN NULL ELSE FALSE: SQL's answer of a quantified
/// comparison from "some row compares true" and "some row compares NULL" (no unknown: matched).
db::ExprPtr three_valued(db::ExprPtr matched, db::ExprPtr unknown) {
    if (unknown == nullptr) {
        return matched;
    }
    return db::expr::case_when({{std::move(matched), db::expr::constant(db::Value::boolean(true))},
                                {std::move(unknown), db::expr::null(db::Type::boolean())}},
                               db::expr::constant(db::Value::boolean(false)));
}

} // namespace

db::ExprPtr Binder::add_mark(Context &context, LogicalPtr right, std::vector<db::ExprPtr> conjuncts) {
    // The mark join sits inside this block: it cannot read the enclosing query's columns, which
    // only a correlation conjunct of the block's WHERE carries out of it.
    const auto &outer = context.scope->outer_references;
    for (const auto &conjunct : conjuncts) {
        for (const ColumnId id : columns_of(*conjunct)) {
            if (std::find(outer.begin(), outer.end(), id) != outer.end()) {
                fail("a subquery compared with a column of an enclosing query (\"" + _columns[id].name +
                         "\") is not supported inside another subquery",
                     -1);
            }
        }
    }
    const ColumnId mark = _columns.add("mark", db::Type::boolean(), false);
    SemiJoin join{db::JoinKind::mark, std::move(right), std::move(conjuncts), mark};
    (context.after_aggregate ? context.block->post_aggregate_joins : context.block->outer_leaves)
        .push_back(std::move(join));
    return _columns.ref(mark);
}

std::vector<db::ExprPtr> Binder::correlate(std::vector<db::ExprPtr> conjuncts, Context &context,
                                           std::int64_t location) {
    if (!context.after_aggregate || context.aggregates == nullptr || conjuncts.empty()) {
        return conjuncts;
    }
    std::set<ColumnId> outer;
    for (const RangeEntry &entry : context.scope->entries) {
        outer.insert(entry.ids.begin(), entry.ids.end());
        outer.insert(entry.merged.begin(), entry.merged.end());
    }
    for (auto &conjunct : conjuncts) {
        conjunct = db::expr::remap_columns(conjunct, [&](std::uint32_t id) -> std::uint32_t {
            if (outer.count(id) == 0) {
                return id;
            }
            const auto grouped = match_group(_columns.ref(id), *context.aggregates);
            if (!grouped.has_value()) {
                fail("subquery uses ungrouped column \"" + _columns[id].name +
                         "\" from outer query (it must appear in the GROUP BY clause)",
                     location);
            }
            return static_cast<std::uint32_t>((*grouped)->column_index());
        });
    }
    return conjuncts;
}

db::ExprPtr Binder::value_over_no_rows(const db::ExprPtr &expression, const AggregateState &state,
                                       std::int64_t location) {
    // Evaluated once over a one-row batch: count() reads 0, every other aggregate and key NULL.
    const std::vector<ColumnId> ids = columns_of(*expression);
    db::Batch batch;
    batch.rows = 1;
    for (const ColumnId id : ids) {
        const db::Type type = _columns[id].type;
        db::Vector column(type, 1);
        switch (type.physical()) {
        case db::PhysicalType::u8:
            column.mutable_data<std::uint8_t>()[0] = 0;
            break;
        case db::PhysicalType::i64:
            column.mutable_data<std::int64_t>()[0] = 0;
            break;
        case db::PhysicalType::f64:
            column.mutable_data<double>()[0] = 0.0;
            break;
        case db::PhysicalType::i128:
            column.mutable_data<db::Int128>()[0] = 0;
            break;
        case db::PhysicalType::string:
            column.mutable_data<db::StringRef>()[0] = db::StringRef{};
            break;
        }
        const bool count = std::any_of(state.aggregates.begin(), state.aggregates.end(), [&](const auto &a) {
            return a.output == id && (a.function == db::AggregateFunction::count_star ||
                                      a.function == db::AggregateFunction::count ||
                                      a.function == db::AggregateFunction::count_distinct);
        });
        if (!count) {
            column.set_null(0);
        }
        batch.columns.push_back(std::move(column));
    }
    const db::ExprPtr local = db::expr::remap_columns(expression, [&](std::uint32_t id) {
        return static_cast<std::uint32_t>(std::find(ids.begin(), ids.end(), id) - ids.begin());
    });
    db::Vector out;
    if (const db::EvalStatus status = db::evaluate(*local, batch, out); !status) {
        fail("correlated subquery: its value over no rows fails: " + std::string(status.message()), location);
    }
    return db::expr::constant(out.value(0));
}

Bound Binder::bind_quantified(const Json &body, bool all, Context &context) {
    const std::int64_t location = int_field(body, "location", -1);
    const Json &subselect = field(body, "subselect");
    const auto operator_names = list_field(body, "operName");
    std::string op = "=";
    if (operator_names.size() > 1) {
        fail("qualified operator names are not supported with ANY/ALL", location);
    }
    if (operator_names.size() == 1) {
        op = string_value(*operator_names.front());
    }
    static const std::pair<const char *, db::CompareOp> operators[] = {
        {"=", db::CompareOp::equal},         {"<>", db::CompareOp::not_equal},
        {"!=", db::CompareOp::not_equal},    {"<", db::CompareOp::less},
        {"<=", db::CompareOp::less_equal},   {">", db::CompareOp::greater},
        {">=", db::CompareOp::greater_equal}};
    const auto found = std::find_if(std::begin(operators), std::end(operators),
                                    [&](const auto &entry) { return op == entry.first; });
    if (found == std::end(operators)) {
        fail("operator " + op + " is not supported with ANY/ALL subqueries", location);
    }
    // x op ALL (S) = NOT (x (negated op) ANY (S)), in three-valued logic as well.
    const db::CompareOp compare_op = all ? negated(found->second) : found->second;
    const Json &test = field(body, "testexpr");
    std::vector<const Json *> tests{&test};
    if (node_name(test) == "RowExpr") {
        tests = list_field(node_body(test), "args");
        if (compare_op != db::CompareOp::equal) {
            fail("row comparisons with ANY/ALL subqueries are supported only as IN and NOT IN", location);
        }
    }
    std::vector<Bound> outer;
    bool outer_nullable = false;
    for (const Json *item : tests) {
        outer.push_back(bind(*item, context));
        if (outer.back().interval.has_value()) {
            fail("an interval cannot be compared", outer.back().location);
        }
        for (ColumnId id : columns_of(*outer.back().expr)) {
            outer_nullable = outer_nullable || _columns[id].nullable;
        }
    }
    if (outer.size() == 1 && single_row_aggregate(node_body(subselect))) {
        // An aggregate without GROUP BY has exactly one row v: x op ANY {v} and x op ALL {v}
        // are both x op v (a scalar subquery, correlated or not).
        Bound value = bind_scalar_subquery(body, context);
        Bound result;
        result.location = location;
        result.expr = compare(found->second, outer.front(), value, location);
        return result;
    }
    const auto bind_subquery = [&] {
        BoundQuery bound = bind_select(node_body(subselect), context.scope, Correlation::semi_join);
        if (bound.names.size() != outer.size()) {
            fail(bound.names.size() > outer.size() ? "subquery has too many columns"
                                                   : "subquery has too few columns",
                 location);
        }
        if (outer.size() > 1 && !bound.correlated.empty()) {
            fail("correlated IN subqueries with several columns are not supported", location);
        }
        bound.correlated = correlate(std::move(bound.correlated), context, location);
        return bound;
    };
    const auto inner_bound = [&](ColumnId id) {
        Bound b;
        b.expr = _columns.ref(id);
        b.location = location;
        return b;
    };
    BoundQuery bound = bind_subquery();
    bool inner_nullable = false;
    for (std::size_t i = 0; i < outer.size(); ++i) {
        inner_nullable = inner_nullable || _columns[bound.plan->output[i]].nullable;
    }
    Bound result;
    result.location = location;

    if (compare_op != db::CompareOp::equal && bound.correlated.empty()) {
        // An ordering (or <>) comparison with an uncorrelated subquery: one row of min, max,
        // row count and non-NULL count decides it for every outer row.
        const ColumnId value = bound.plan->output.front();
        const db::Type type = _columns[value].type;
        const ColumnId rows = _columns.add("any_rows", db::Type::bigint(), false);
        const ColumnId values = _columns.add("any_values", db::Type::bigint(), false);
        const ColumnId low = _columns.add("any_min", type, true);
        const ColumnId high = _columns.add("any_max", type, true);
        std::vector<LogicalAggregate> aggregates{
            LogicalAggregate{db::AggregateFunction::count_star, nullptr, rows},
            LogicalAggregate{db::AggregateFunction::count, _columns.ref(value), values},
            LogicalAggregate{db::AggregateFunction::min, _columns.ref(value), low},
            LogicalAggregate{db::AggregateFunction::max, _columns.ref(value), high}};
        (context.after_aggregate ? context.block->post_aggregate_leaves : context.block->leaves)
            .push_back(make_aggregate(std::move(bound.plan), {}, {}, std::move(aggregates)));
        db::ExprPtr matched;
        switch (compare_op) {
        case db::CompareOp::less:
        case db::CompareOp::less_equal:
            matched = compare(compare_op, outer.front(), inner_bound(high), location);
            break;
        case db::CompareOp::greater:
        case db::CompareOp::greater_equal:
            matched = compare(compare_op, outer.front(), inner_bound(low), location);
            break;
        default: // <>: some non-NULL value differs from x
            matched = db::expr::logical_or(compare(compare_op, outer.front(), inner_bound(low), location),
                                           compare(compare_op, outer.front(), inner_bound(high), location));
            break;
        }
        const db::ExprPtr zero = db::expr::constant(db::Value::bigint(0));
        db::ExprPtr unknown =
            db::expr::logical_or(db::expr::greater(_columns.ref(rows), _columns.ref(values)),
                                 db::expr::logical_and(db::expr::is_null(outer.front().expr),
                                                       db::expr::greater(_columns.ref(rows), zero)));
        result.expr = three_valued(std::move(matched), std::move(unknown));
        if (all) {
            result.expr = db::expr::logical_not(result.expr);
        }
        return result;
    }

    // Mark joins: "some row compares true" (hash keys when op is =), and where NULLs can occur
    // "some row compares NULL".
    std::vector<db::ExprPtr> conjuncts;
    for (std::size_t i = 0; i < outer.size(); ++i) {
        conjuncts.push_back(compare(compare_op, outer[i], inner_bound(bound.plan->output[i]), location));
    }
    conjuncts.insert(conjuncts.end(), bound.correlated.begin(), bound.correlated.end());
    const bool correlated = !bound.correlated.empty();
    db::ExprPtr matched = add_mark(context, std::move(bound.plan), std::move(conjuncts));
    db::ExprPtr unknown;
    // No row compares true: NULL when the subquery has a NULL (in any column: DuckDB's null-aware
    // mark join, so a row can compare NULL where PostgreSQL finds a column pair that is false),
    // or when x has one and the subquery has rows.
    db::ExprPtr outer_null;
    if (outer_nullable) {
        std::vector<db::ExprPtr> nulls;
        for (const Bound &item : outer) {
            nulls.push_back(db::expr::is_null(item.expr));
        }
        outer_null = nulls.size() == 1 ? nulls.front() : db::expr::logical_or(std::move(nulls));
    }
    std::vector<db::ExprPtr> parts;
    if ((inner_nullable || outer_nullable) && !correlated) {
        // Uncorrelated: one row of counts (rows, rows without NULLs) answers both questions for
        // every outer row.
        BoundQuery copy = bind_subquery();
        db::ExprPtr complete = _columns.ref(copy.plan->output.front());
        if (outer.size() > 1) {
            std::vector<db::ExprPtr> present;
            for (std::size_t i = 0; i < outer.size(); ++i) {
                present.push_back(db::expr::is_null(_columns.ref(copy.plan->output[i]), true));
            }
            complete = db::expr::case_when(
                {{db::expr::logical_and(std::move(present)), db::expr::constant(db::Value::integer(1))}},
                db::expr::null(db::Type::integer()));
        }
        const ColumnId rows = _columns.add("in_rows", db::Type::bigint(), false);
        const ColumnId complete_rows = _columns.add("in_rows_without_nulls", db::Type::bigint(), false);
        std::vector<LogicalAggregate> aggregates{
            LogicalAggregate{db::AggregateFunction::count_star, nullptr, rows},
            LogicalAggregate{db::AggregateFunction::count, std::move(complete), complete_rows}};
        (context.after_aggregate ? context.block->post_aggregate_leaves : context.block->leaves)
            .push_back(make_aggregate(std::move(copy.plan), {}, {}, std::move(aggregates)));
        if (inner_nullable) {
            parts.push_back(db::expr::greater(_columns.ref(rows), _columns.ref(complete_rows)));
        }
        if (outer_nullable) {
            parts.push_back(db::expr::logical_and(
                outer_null, db::expr::greater(_columns.ref(rows), db::expr::constant(db::Value::bigint(0)))));
        }
    } else {
        // Correlated: marks over copies of the subquery, per outer row's correlation values.
        if (inner_nullable) {
            BoundQuery copy = bind_subquery();
            std::vector<db::ExprPtr> null_rows;
            for (std::size_t i = 0; i < outer.size(); ++i) {
                null_rows.push_back(db::expr::is_null(_columns.ref(copy.plan->output[i])));
            }
            std::vector<db::ExprPtr> null_row = copy.correlated;
            null_row.push_back(null_rows.size() == 1 ? null_rows.front()
                                                     : db::expr::logical_or(std::move(null_rows)));
            parts.push_back(add_mark(context, std::move(copy.plan), std::move(null_row)));
        }
        if (outer_nullable) {
            BoundQuery copy = bind_subquery();
            db::ExprPtr any_row = add_mark(context, std::move(copy.plan), std::move(copy.correlated));
            parts.push_back(db::expr::logical_and(outer_null, any_row));
        }
    }
    if (!parts.empty()) {
        unknown = parts.size() == 1 ? parts.front() : db::expr::logical_or(std::move(parts));
    }
    result.expr = three_valued(std::move(matched), std::move(unknown));
    if (all) {
        result.expr = db::expr::logical_not(result.expr);
    }
    return result;
}

Bound Binder::bind_sublink(const Json &body, Context &context) {
    const std::string type = string_field(body, "subLinkType");
    const std::int64_t location = int_field(body, "location", -1);
    if (type != "EXISTS_SUBLINK" && type != "ANY_SUBLINK" && type != "ALL_SUBLINK" &&
        type != "EXPR_SUBLINK") {
        fail(type == "ARRAY_SUBLINK" ? "ARRAY subqueries are not supported"
                                     : "this kind of subquery (" + type + ") is not supported",
             location);
    }
    if (context.block == nullptr) {
        fail(std::string("subqueries are not allowed in ") + context.clause, location);
    }
    const Json &subselect = field(body, "subselect");
    if (type == "EXISTS_SUBLINK") {
        BoundQuery bound = bind_select(node_body(subselect), context.scope, Correlation::semi_join, true);
        Bound result;
        result.location = location;
        result.expr = add_mark(context, std::move(bound.plan),
                               correlate(std::move(bound.correlated), context, location));
        return result;
    }
    if (type != "EXPR_SUBLINK") {
        return bind_quantified(body, type == "ALL_SUBLINK", context);
    }
    return bind_scalar_subquery(body, context);
}

bool Binder::single_row_aggregate(const Json &select) {
    const std::string op = string_field(select, "op");
    const auto targets = list_field(select, "targetList");
    if ((!op.empty() && op != "SETOP_NONE") || field(select, "valuesLists").is_array() ||
        targets.size() != 1 || !list_field(select, "groupClause").empty() ||
        !field(select, "havingClause").is_null() || !field(select, "limitCount").is_null() ||
        !field(select, "limitOffset").is_null()) {
        return false;
    }
    const Json &value = field(node_body(*targets.front()), "val");
    return contains_aggregate(value, 0) && !contains_window(value, 0);
}

Bound Binder::bind_scalar_subquery(const Json &body, Context &context) {
    const std::int64_t location = int_field(body, "location", -1);
    Block &block = *context.block;
    const Json &subselect = field(body, "subselect");
    BoundQuery bound = bind_select(node_body(subselect), context.scope, Correlation::group_by_key);
    const std::size_t keys = bound.inner_keys.size();
    if (bound.plan->output.size() != keys + 1) {
        fail("subquery must return only one column", location);
    }
    const ColumnId value = bound.plan->output[keys];
    Bound result;
    result.location = location;
    result.expr = _columns.ref(value);
    if (keys == 0) {
        if (!bound.single_row) {
            fail("scalar subqueries must be aggregates without GROUP BY (TunaDB cannot prove that this one "
                 "returns "
                 "at most one row)",
                 location);
        }
        (context.after_aggregate ? block.post_aggregate_leaves : block.leaves)
            .push_back(std::move(bound.plan));
        return result;
    }
    if (!contains_aggregate(node_body(subselect), 0)) {
        fail("correlated scalar subqueries must compute an aggregate", location);
    }
    if (!bound.one_row_per_key) {
        // Several rows per correlation value would be an error, which TunaDB does not check.
        fail("correlated scalar subqueries may GROUP BY only their correlation columns", location);
    }
    std::vector<db::ExprPtr> condition;
    for (std::size_t i = 0; i < keys; ++i) {
        const db::ExprPtr outer_key = bound.outer_keys[i];
        const db::ExprPtr inner_key = _columns.ref(bound.inner_keys[i]);
        try {
            if (bound.null_safe_keys && outer_key->kind() != db::ExprKind::constant) {
                // NULL-safe and still hash keys: coalesce(x, zero) = coalesce(y, zero) AND
                // (x IS NULL) = (y IS NULL).
                db::Value zero = db::Value::null_of(outer_key->type());
                zero.null = false;
                condition.push_back(
                    db::expr::equal(db::expr::coalesce({outer_key, db::expr::constant(zero)}),
                                    db::expr::coalesce({inner_key, db::expr::constant(zero)})));
                condition.push_back(
                    db::expr::equal(db::expr::is_null(outer_key), db::expr::is_null(inner_key)));
            } else {
                condition.push_back(db::expr::equal(outer_key, inner_key));
            }
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
    }
    const bool empty_is_null =
        bound.empty_value == nullptr ||
        (bound.empty_value->kind() == db::ExprKind::constant && bound.empty_value->value().null);
    // An operand of a WHERE comparison: an inner join on the keys drops the rows without a
    // group, as the comparison with NULL would.
    const bool decorrelatable =
        context.decorrelatable != nullptr && &node_body(*context.decorrelatable) == &body;
    if (decorrelatable && !context.after_aggregate && empty_is_null) {
        block.leaves.push_back(std::move(bound.plan));
        block.where_conjuncts.insert(block.where_conjuncts.end(), condition.begin(), condition.end());
        return result;
    }
    // Elsewhere: left-joined on the keys; an outer row without a group reads the select
    // expression over no rows (count() is 0 there, not NULL: the "count bug").
    for (ColumnId id : bound.plan->output) {
        _columns[id].nullable = true;
    }
    const ColumnId key = bound.null_safe_keys ? bound.inner_keys.back() : bound.inner_keys.front();
    (context.after_aggregate ? block.post_aggregate_joins : block.outer_leaves)
        .push_back(SemiJoin{db::JoinKind::left_outer, std::move(bound.plan),
                            correlate(std::move(condition), context, location), 0});
    if (!empty_is_null) {
        try {
            result.expr =
                db::expr::case_when({{db::expr::is_null(_columns.ref(key)), bound.empty_value}}, result.expr);
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
    }
    return result;
}

Bound Binder::bind_a_expr(const Json &body, Context &context) {
    const std::string kind = string_field(body, "kind");
    const std::int64_t location = int_field(body, "location", -1);
    const std::string op = operator_name(body);
    if (kind == "AEXPR_OP") {
        return bind_operator(op, body, context);
    }
    if (kind == "AEXPR_IN") {
        Bound operand = bind(field(body, "lexpr"), context);
        const bool negated = op == "<>";
        std::vector<Bound> items;
        for (const Json *item : list_items(field(body, "rexpr"))) {
            items.push_back(bind(*item, context));
        }
        if (operand.interval.has_value()) {
            fail("intervals cannot be compared", location);
        }
        bool constant = true;
        std::vector<db::Value> values;
        for (auto &item : items) {
            if (item.interval.has_value()) {
                fail("intervals cannot be compared", item.location);
            }
            Bound copy = operand;
            coerce_literals(copy, item);
            constant = constant && item.expr->kind() == db::ExprKind::constant;
            if (constant) {
                values.push_back(item.expr->value());
            }
        }
        Bound result;
        result.location = location;
        try {
            if (constant) {
                result.expr = db::expr::in_list(operand.expr, std::move(values), negated);
            } else {
                std::vector<db::ExprPtr> comparisons;
                for (auto &item : items) {
                    comparisons.push_back(compare(negated ? db::CompareOp::not_equal : db::CompareOp::equal,
                                                  operand, item, location));
                }
                result.expr = comparisons.size() == 1 ? comparisons[0]
                              : negated               ? db::expr::logical_and(std::move(comparisons))
                                                      : db::expr::logical_or(std::move(comparisons));
            }
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (kind == "AEXPR_LIKE" || kind == "AEXPR_ILIKE") {
        const bool insensitive = kind == "AEXPR_ILIKE";
        Bound operand = bind(field(body, "lexpr"), context);
        const Json &pattern_node = field(body, "rexpr");
        std::optional<char> escape;
        const Json *pattern = &pattern_node;
        if (node_name(pattern_node) == "FuncCall" &&
            function_name(node_body(pattern_node)) == "like_escape") {
            const auto arguments = list_field(node_body(pattern_node), "args");
            if (arguments.size() != 2) {
                fail("invalid ESCAPE clause", location);
            }
            pattern = arguments[0];
            Context plain;
            plain.clause = "ESCAPE";
            db::ExprPtr escape_value = bind_value(*arguments[1], plain);
            if (escape_value->kind() != db::ExprKind::constant ||
                escape_value->type().id != db::TypeId::varchar || escape_value->value().str.size() != 1) {
                fail("ESCAPE must be a single character", location_of(*arguments[1]));
            }
            escape = escape_value->value().str[0];
        }
        Context plain;
        plain.clause = "a LIKE pattern";
        db::ExprPtr pattern_value = bind_value(*pattern, plain);
        if (pattern_value->kind() != db::ExprKind::constant ||
            pattern_value->type().id != db::TypeId::varchar) {
            fail("LIKE patterns must be string constants", location_of(*pattern));
        }
        if (operand.interval.has_value()) {
            fail("LIKE needs a string", location);
        }
        Bound result;
        result.location = location;
        try {
            std::string pattern_text = pattern_value->value().str;
            if (insensitive) {
                // ILIKE: LIKE over both sides in lower case (DuckDB's lower()).
                operand.expr = db::expr::function(db::Function::lower, {operand.expr});
                pattern_text = db::expr::function(db::Function::lower,
                                                  {db::expr::constant(db::Value::varchar(pattern_text))})
                                   ->value()
                                   .str;
            }
            result.expr = db::expr::like(operand.expr, pattern_text, op == "!~~" || op == "!~~*", escape);
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (kind == "AEXPR_BETWEEN" || kind == "AEXPR_NOT_BETWEEN") {
        Bound operand = bind(field(body, "lexpr"), context);
        const auto bounds = list_items(field(body, "rexpr"));
        if (bounds.size() != 2) {
            fail("BETWEEN needs two bounds", location);
        }
        Bound low = bind(*bounds[0], context);
        Bound high = bind(*bounds[1], context);
        if (operand.interval || low.interval || high.interval) {
            fail("intervals cannot be compared", location);
        }
        Bound operand_low = operand;
        coerce_literals(operand_low, low);
        Bound operand_high = operand;
        coerce_literals(operand_high, high);
        Bound result;
        result.location = location;
        try {
            result.expr =
                db::expr::between(operand_low.expr, low.expr, high.expr, kind == "AEXPR_NOT_BETWEEN");
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (kind == "AEXPR_SIMILAR") {
        fail("SIMILAR TO is not supported", location);
    }
    if (kind == "AEXPR_DISTINCT" || kind == "AEXPR_NOT_DISTINCT" || kind == "AEXPR_NULLIF") {
        Bound left = bind(field(body, "lexpr"), context);
        Bound right = bind(field(body, "rexpr"), context);
        if (left.interval || right.interval) {
            fail("intervals cannot be compared", location);
        }
        Bound result;
        result.location = location;
        if (kind == "AEXPR_NULLIF") {
            // NULLIF(a, b): CASE WHEN a = b THEN NULL ELSE a END.
            const db::ExprPtr value = left.expr;
            db::ExprPtr equal = compare(db::CompareOp::equal, left, right, location);
            try {
                result.expr = db::expr::case_when({{equal, db::expr::null(value->type())}}, value);
            } catch (const db::TypeError &error) {
                fail(error.what(), location);
            }
            return result;
        }
        coerce_literals(left, right);
        try {
            result.expr = db::expr::function(kind == "AEXPR_DISTINCT" ? db::Function::distinct_from
                                                                      : db::Function::not_distinct_from,
                                             {left.expr, right.expr});
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (kind == "AEXPR_OP_ANY" || kind == "AEXPR_OP_ALL") {
        fail("ANY/ALL with arrays are not supported", location);
    }
    if (kind == "AEXPR_BETWEEN_SYM" || kind == "AEXPR_NOT_BETWEEN_SYM") {
        fail("BETWEEN SYMMETRIC is not supported", location);
    }
    fail("unsupported operator expression " + kind, location);
}

Bound Binder::bind_operator(const std::string &op, const Json &body, Context &context) {
    const std::int64_t location = int_field(body, "location", -1);
    const Json &left_node = field(body, "lexpr");
    const Json &right_node = field(body, "rexpr");
    if (left_node.is_null()) {
        Bound operand = bind(right_node, context);
        if (op == "+") {
            return operand;
        }
        if (op == "-") {
            if (operand.interval.has_value()) {
                operand.interval = db::Interval{-operand.interval->months, -operand.interval->days};
                return operand;
            }
            Bound result;
            result.location = location;
            try {
                result.expr = db::expr::negate(operand.expr);
            } catch (const db::TypeError &error) {
                fail(error.what(), location);
            }
            return result;
        }
        fail("operator " + op + " is not supported", location);
    }
    Bound left = bind(left_node, context);
    Bound right = bind(right_node, context);
    static const std::pair<const char *, db::CompareOp> comparisons[] = {
        {"=", db::CompareOp::equal},         {"<>", db::CompareOp::not_equal},
        {"!=", db::CompareOp::not_equal},    {"<", db::CompareOp::less},
        {"<=", db::CompareOp::less_equal},   {">", db::CompareOp::greater},
        {">=", db::CompareOp::greater_equal}};
    for (const auto &[symbol, compare_op] : comparisons) {
        if (op == symbol) {
            Bound result;
            result.location = location;
            result.expr = compare(compare_op, std::move(left), std::move(right), location);
            return result;
        }
    }
    static const std::pair<const char *, db::ArithmeticOp> arithmetics[] = {{"+", db::ArithmeticOp::add},
                                                                            {"-", db::ArithmeticOp::subtract},
                                                                            {"*", db::ArithmeticOp::multiply},
                                                                            {"/", db::ArithmeticOp::divide},
                                                                            {"%", db::ArithmeticOp::modulo}};
    for (const auto &[symbol, arithmetic_op] : arithmetics) {
        if (op == symbol) {
            return arithmetic(arithmetic_op, std::move(left), std::move(right), location);
        }
    }
    if (op == "||") {
        if (left.interval || right.interval) {
            fail("intervals cannot be concatenated", location);
        }
        Bound result;
        result.location = location;
        try {
            result.expr = db::expr::function(db::Function::concat_strict, {left.expr, right.expr});
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    fail("operator " + op + " is not supported", location);
}

db::ExprPtr Binder::bind_value(const Json &node, Context &context) {
    Bound bound = bind(node, context);
    if (bound.interval.has_value()) {
        fail("interval values are supported only in date arithmetic",
             bound.location >= 0 ? bound.location : location_of(node));
    }
    return bound.expr;
}

db::ExprPtr Binder::bind_constant(const Json &node) {
    Context context;
    context.clause = "VALUES";
    db::ExprPtr expression = bind_value(node, context);
    return checked(expression, location_of(node));
}

Bound Binder::bind(const Json &node, Context &context) {
    DepthGuard guard(context.depth);
    const std::string_view kind = node_name(node);
    const Json &body = node_body(node);
    if (context.depth > max_expression_depth) {
        fail("expression nested too deeply (more than 256 levels)", location_of(node));
    }
    // In an aggregate query, a subexpression equal to a GROUP BY key is that key's column.
    if (context.aggregates != nullptr && kind != "A_Const" && kind != "SubLink" &&
        !contains_aggregate(node, 0) && !contains_sublink(node, 0) && !contains_window(node, 0)) {
        Context plain = context;
        plain.aggregates = nullptr;
        plain.clause = context.clause;
        Bound bound = bind(node, plain);
        if (bound.interval.has_value()) {
            return bound;
        }
        if (auto grouped = match_group(bound.expr, *context.aggregates)) {
            bound.expr = *grouped;
            bound.string_literal = false;
            return bound;
        }
        if (bound.expr->is_constant_tree()) {
            return bound;
        }
        if (kind == "ColumnRef") {
            std::string name = column_name(node);
            fail("column \"" + name +
                     "\" must appear in the GROUP BY clause or be used in an aggregate function",
                 location_of(node));
        }
    }
    if (kind == "ColumnRef") {
        return bind_column_ref(body, context);
    }
    if (kind == "A_Const") {
        return bind_constant_node(body);
    }
    if (kind == "A_Expr") {
        return bind_a_expr(body, context);
    }
    if (kind == "BoolExpr") {
        const std::string op = string_field(body, "boolop");
        std::vector<db::ExprPtr> operands;
        for (const Json *argument : list_field(body, "args")) {
            Bound operand = bind(*argument, context);
            if (operand.interval.has_value()) {
                fail("intervals are not booleans", location_of(*argument));
            }
            if (operand.string_literal) {
                operand.expr = cast_literal(operand, db::Type::boolean());
            }
            operands.push_back(null_as_boolean(operand.expr));
        }
        Bound result;
        result.location = int_field(body, "location", -1);
        try {
            if (op == "AND_EXPR") {
                result.expr = db::expr::logical_and(std::move(operands));
            } else if (op == "OR_EXPR") {
                result.expr = db::expr::logical_or(std::move(operands));
            } else {
                if (operands.size() != 1) {
                    fail("NOT takes one operand", result.location);
                }
                result.expr = db::expr::logical_not(operands[0]);
            }
        } catch (const db::TypeError &error) {
            fail(error.what(), result.location);
        }
        return result;
    }
    if (kind == "NullTest") {
        if (node_name(field(body, "arg")) == "RowExpr") {
            fail("IS NULL on rows is not supported", int_field(body, "location", -1));
        }
        Bound operand = bind(field(body, "arg"), context);
        if (operand.interval.has_value()) {
            fail("IS NULL on an interval is not supported", int_field(body, "location", -1));
        }
        Bound result;
        result.location = int_field(body, "location", -1);
        result.expr = db::expr::is_null(operand.expr, string_field(body, "nulltesttype") == "IS_NOT_NULL");
        return result;
    }
    if (kind == "CaseExpr") {
        return bind_case(body, context);
    }
    if (kind == "CoalesceExpr") {
        std::vector<db::ExprPtr> operands;
        for (const Json *argument : list_field(body, "args")) {
            operands.push_back(bind_value(*argument, context));
        }
        Bound result;
        result.location = int_field(body, "location", -1);
        try {
            result.expr = db::expr::coalesce(std::move(operands));
        } catch (const db::TypeError &error) {
            fail(error.what(), result.location);
        }
        return result;
    }
    if (kind == "TypeCast") {
        return bind_type_cast(body, context);
    }
    if (kind == "MinMaxExpr") { // GREATEST(...) and LEAST(...)
        std::vector<db::ExprPtr> operands;
        for (const Json *argument : list_field(body, "args")) {
            operands.push_back(bind_value(*argument, context));
        }
        Bound result;
        result.location = int_field(body, "location", -1);
        try {
            result.expr = db::expr::function(
                string_field(body, "op") == "IS_GREATEST" ? db::Function::greatest : db::Function::least,
                std::move(operands));
        } catch (const db::TypeError &error) {
            fail(error.what(), result.location);
        }
        return result;
    }
    if (kind == "FuncCall") {
        return bind_function(body, context);
    }
    if (kind == "SubLink") {
        return bind_sublink(body, context);
    }
    if (kind == "ParamRef") {
        fail("parameters ($n) are not supported", int_field(body, "location", -1));
    }
    if (kind == "SQLValueFunction") {
        if (string_field(body, "op") == "SVFOP_CURRENT_DATE") {
            // The local date when the statement is bound (DuckDB: the transaction's start).
            const std::time_t now = std::time(nullptr);
            std::tm local{};
            localtime_r(&now, &local);
            Bound result;
            result.location = int_field(body, "location", -1);
            result.expr = db::expr::constant(db::Value::date(
                db::date::from_civil(local.tm_year + 1900, static_cast<unsigned>(local.tm_mon + 1),
                                     static_cast<unsigned>(local.tm_mday))));
            return result;
        }
        fail("CURRENT_TIME, CURRENT_TIMESTAMP and similar functions are not supported (CURRENT_DATE is)",
             int_field(body, "location", -1));
    }
    if (kind == "BooleanTest") {
        fail("IS [NOT] TRUE/FALSE/UNKNOWN is not supported", int_field(body, "location", -1));
    }
    if (kind == "A_Indirection" || kind == "A_ArrayExpr" || kind == "RowExpr") {
        fail("arrays and rows are not supported", location_of(node));
    }
    if (kind == "CollateClause") {
        fail("COLLATE is not supported", location_of(node));
    }
    fail("unsupported expression: " + std::string(kind.empty() ? "?" : kind), location_of(node));
}

} // namespace mx::sql::detail
