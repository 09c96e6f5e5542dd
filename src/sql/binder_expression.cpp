// Expression binding: parse tree expressions -> typed db::Expr trees over ColumnIds (column
// references, constants, operators, casts and CASE; functions and subqueries have files of
// their own).

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

bool contains_sublink(const ast::Expr &node, int depth) {
    if (depth > max_expression_depth) {
        return false;
    }
    if (node.is<ast::SubLink>()) {
        return true;
    }
    bool found = false;
    ast::for_each_child(node,
                        [&](const ast::Expr &child) { found = found || contains_sublink(child, depth + 1); });
    return found;
}

} // namespace

std::optional<db::ExprPtr> Binder::match_group(const db::ExprPtr &expression, const AggregateState &state) {
    for (std::size_t i = 0; i < state.groups.size(); ++i) {
        if (same_expression(*state.groups[i], *expression)) {
            return _columns.ref(state.group_ids[i]);
        }
    }
    return std::nullopt;
}

std::string Binder::column_name(const ast::Expr &node) {
    if (const auto *reference = node.as<ast::ColumnRef>()) {
        if (reference->star) {
            return std::string();
        }
        return reference->names.empty() ? std::string("?column?") : reference->names.back();
    }
    if (const auto *call = node.as<ast::FuncCall>()) {
        return call->name;
    }
    if (const auto *cast = node.as<ast::TypeCast>()) {
        return cast->argument != nullptr ? column_name(*cast->argument) : std::string("?column?");
    }
    if (node.is<ast::CaseExpr>()) {
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

db::Type Binder::bind_type(const ast::TypeName &type_name) {
    const std::vector<std::string> &names = type_name.names;
    const std::int64_t location = type_name.location;
    const std::string name = names.empty() ? std::string() : lower(names.back());
    if (type_name.array) {
        fail("array types are not supported", location);
    }
    std::vector<std::int64_t> modifiers;
    for (const ast::ExprPtr &modifier : type_name.modifiers) {
        const auto *constant = modifier->as<ast::Constant>();
        if (constant == nullptr || constant->kind != ast::Constant::Kind::integer) {
            fail("type modifiers must be integer constants", modifier->location);
        }
        modifiers.push_back(constant->integer);
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
    std::string shown = names.empty() ? std::string("?") : names.back();
    if (shown == "int4" || shown == "int8" || shown == "float8") {
        shown = name;
    }
    fail("type \"" + shown +
             "\" is not supported (INTEGER, BIGINT, DECIMAL, DOUBLE, DATE, CHAR, VARCHAR, BOOLEAN are)",
         location);
}

Bound Binder::bind_constant_node(const ast::Constant &constant, ast::Location location) {
    using Kind = ast::Constant::Kind;
    Bound result;
    result.location = location;
    if (constant.kind == Kind::null) {
        result.expr = db::expr::null(db::Type::integer());
        return result;
    }
    if (constant.kind == Kind::integer) {
        result.expr = db::expr::constant(db::Value::integer(constant.integer));
        return result;
    }
    if (constant.kind == Kind::string) {
        result.expr = db::expr::constant(db::Value::varchar(constant.text));
        result.string_literal = true;
        return result;
    }
    if (constant.kind == Kind::boolean) {
        result.expr = db::expr::constant(db::Value::boolean(constant.boolean));
        return result;
    }
    if (constant.kind == Kind::number) {
        const std::string &text = constant.text;
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
    if (constant.kind == Kind::bit_string) {
        fail("bit string constants are not supported", result.location);
    }
    fail("unsupported constant", result.location);
}

Bound Binder::bind_column_ref(const ast::ColumnRef &ref, ast::Location location, Context &context) {
    if (ref.star || ref.inner_star) {
        fail("\"*\" is only allowed in the select list and in count(*)", location);
    }
    const std::vector<std::string> &parts = ref.names;
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
        if (level >= 1) {
            if (!context.scope->outer_allowed) {
                fail("correlated reference to \"" + shown + "\" is only supported in WHERE", location);
            }
            // Every block between here and the column's reads it from its enclosing query: a
            // block in between holds the reference inside a subquery of its own, which makes it a
            // dependent join (bind_select) that the optimizer pass decorrelate unnests.
            Scope *reader = context.scope;
            for (int step = 0; step < level; ++step, reader = reader->parent) {
                auto &outer = reader->outer_references;
                if (std::find(outer.begin(), outer.end(), *found) == outer.end()) {
                    outer.push_back(*found);
                }
            }
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

Bound Binder::bind_case(const ast::CaseExpr &expression, ast::Location location, Context &context) {
    std::optional<Bound> operand;
    if (expression.operand != nullptr) {
        operand = bind(*expression.operand, context);
    }
    std::vector<Bound> results;
    std::vector<db::ExprPtr> conditions;
    for (const ast::CaseWhen &branch : expression.branches) {
        Bound condition = bind(*branch.condition, context);
        if (operand.has_value()) {
            conditions.push_back(compare(db::CompareOp::equal, *operand, condition, branch.location));
        } else {
            if (condition.interval.has_value() || condition.expr->type().id != db::TypeId::boolean) {
                if (!condition.expr->value().null || condition.expr->kind() != db::ExprKind::constant) {
                    fail("argument of CASE/WHEN must be type BOOLEAN, not type " +
                             (condition.interval ? std::string("INTERVAL")
                                                 : condition.expr->type().to_string()),
                         branch.condition->location);
                }
                condition.expr = db::expr::null(db::Type::boolean());
            }
            conditions.push_back(condition.expr);
        }
        results.push_back(bind(*branch.result, context));
    }
    std::optional<Bound> otherwise;
    if (expression.otherwise != nullptr) {
        otherwise = bind(*expression.otherwise, context);
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

Bound Binder::bind_type_cast(const ast::TypeCast &cast, ast::Location cast_location, Context &context) {
    const ast::TypeName &type_name = cast.type;
    const std::int64_t location = type_name.location >= 0 ? type_name.location : cast_location;
    const std::string name = type_name.names.empty() ? std::string() : lower(type_name.names.back());
    const ast::Expr &argument = *cast.argument;
    if (name == "interval") {
        const auto *constant = argument.as<ast::Constant>();
        if (constant == nullptr || (constant->kind != ast::Constant::Kind::string &&
                                    constant->kind != ast::Constant::Kind::integer)) {
            fail("only constant intervals such as INTERVAL '3' MONTH are supported", location);
        }
        std::string text = constant->kind == ast::Constant::Kind::string ? constant->text
                                                                         : std::to_string(constant->integer);
        std::int64_t mask = -1;
        if (!type_name.modifiers.empty()) {
            const auto *modifier = type_name.modifiers[0]->as<ast::Constant>();
            mask =
                modifier != nullptr && modifier->kind == ast::Constant::Kind::integer ? modifier->integer : 0;
        }
        Bound result;
        result.interval = parse_interval(text, mask, argument.location >= 0 ? argument.location : location);
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

Bound Binder::bind_in_list(const ast::InList &in, ast::Location location, Context &context) {
    Bound operand = bind(*in.operand, context);
    const bool negated = in.negated;
    std::vector<Bound> items;
    for (const ast::ExprPtr &item : in.items) {
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

Bound Binder::bind_like(const ast::Like &like, ast::Location location, Context &context) {
    const bool insensitive = like.insensitive;
    Bound operand = bind(*like.operand, context);
    std::optional<char> escape;
    if (like.invalid_escape) {
        fail("invalid ESCAPE clause", location);
    }
    const ast::Expr *pattern = like.pattern.get();
    if (like.escape != nullptr) {
        Context plain;
        plain.clause = "ESCAPE";
        db::ExprPtr escape_value = bind_value(*like.escape, plain);
        if (escape_value->kind() != db::ExprKind::constant ||
            escape_value->type().id != db::TypeId::varchar || escape_value->value().str.size() != 1) {
            fail("ESCAPE must be a single character", like.escape->location);
        }
        escape = escape_value->value().str[0];
    }
    Context plain;
    plain.clause = "a LIKE pattern";
    db::ExprPtr pattern_value = bind_value(*pattern, plain);
    if (pattern_value->kind() != db::ExprKind::constant || pattern_value->type().id != db::TypeId::varchar) {
        fail("LIKE patterns must be string constants", pattern->location);
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
        result.expr = db::expr::like(operand.expr, pattern_text, like.negated, escape);
    } catch (const db::TypeError &error) {
        fail(error.what(), location);
    }
    return result;
}

Bound Binder::bind_between(const ast::Between &between, ast::Location location, Context &context) {
    Bound operand = bind(*between.operand, context);
    const std::vector<ast::ExprPtr> &bounds = between.bounds;
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
        result.expr = db::expr::between(operand_low.expr, low.expr, high.expr, between.negated);
    } catch (const db::TypeError &error) {
        fail(error.what(), location);
    }
    return result;
}

Bound Binder::bind_operator(const ast::Operator &expression, ast::Location location, Context &context) {
    const std::string &op = expression.name;
    if (expression.left == nullptr) {
        Bound operand = bind(*expression.right, context);
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
    Bound left = bind(*expression.left, context);
    Bound right = bind(*expression.right, context);
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

db::ExprPtr Binder::bind_value(const ast::Expr &node, Context &context) {
    Bound bound = bind(node, context);
    if (bound.interval.has_value()) {
        fail("interval values are supported only in date arithmetic",
             bound.location >= 0 ? bound.location : node.location);
    }
    return bound.expr;
}

db::ExprPtr Binder::bind_constant(const ast::Expr &node) {
    Context context;
    context.clause = "VALUES";
    db::ExprPtr expression = bind_value(node, context);
    return checked(expression, node.location);
}

Bound Binder::bind_nullif(const ast::Expr &left_node, const ast::Expr &right_node, ast::Location location,
                          Context &context) {
    // NULLIF(a, b), as operator or as function: CASE WHEN a = b THEN NULL ELSE a END.
    Bound left = bind(left_node, context);
    Bound right = bind(right_node, context);
    if (left.interval || right.interval) {
        fail("intervals cannot be compared", location);
    }
    Bound result;
    result.location = location;
    const db::ExprPtr value = left.expr;
    db::ExprPtr equal = compare(db::CompareOp::equal, left, right, location);
    try {
        result.expr = db::expr::case_when({{equal, db::expr::null(value->type())}}, value);
    } catch (const db::TypeError &error) {
        fail(error.what(), location);
    }
    return result;
}

Bound Binder::bind_bool(const ast::BoolExpr &expression, ast::Location location, Context &context) {
    std::vector<db::ExprPtr> operands;
    for (const ast::ExprPtr &argument : expression.arguments) {
        Bound operand = bind(*argument, context);
        if (operand.interval.has_value()) {
            fail("intervals are not booleans", argument->location);
        }
        if (operand.string_literal) {
            operand.expr = cast_literal(operand, db::Type::boolean());
        }
        operands.push_back(null_as_boolean(operand.expr));
    }
    Bound result;
    result.location = location;
    try {
        if (expression.op == ast::BoolOperator::and_op) {
            result.expr = db::expr::logical_and(std::move(operands));
        } else if (expression.op == ast::BoolOperator::or_op) {
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

Bound Binder::bind(const ast::Expr &node, Context &context) {
    DepthGuard guard(context.depth);
    const std::int64_t location = node.location;
    if (context.depth > max_expression_depth) {
        fail("expression nested too deeply (more than 256 levels)", location);
    }
    // In an aggregate query, a subexpression equal to a GROUP BY key is that key's column.
    if (context.aggregates != nullptr && !node.is<ast::Constant>() && !node.is<ast::SubLink>() &&
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
        if (node.is<ast::ColumnRef>()) {
            std::string name = column_name(node);
            fail("column \"" + name +
                     "\" must appear in the GROUP BY clause or be used in an aggregate function",
                 location);
        }
    }
    if (const auto *reference = node.as<ast::ColumnRef>()) {
        return bind_column_ref(*reference, location, context);
    }
    if (const auto *constant = node.as<ast::Constant>()) {
        return bind_constant_node(*constant, location);
    }
    if (const auto *op = node.as<ast::Operator>()) {
        return bind_operator(*op, location, context);
    }
    if (const auto *in = node.as<ast::InList>()) {
        return bind_in_list(*in, location, context);
    }
    if (const auto *like = node.as<ast::Like>()) {
        return bind_like(*like, location, context);
    }
    if (const auto *between = node.as<ast::Between>()) {
        return bind_between(*between, location, context);
    }
    if (const auto *distinct = node.as<ast::DistinctFrom>()) {
        Bound left = bind(*distinct->left, context);
        Bound right = bind(*distinct->right, context);
        if (left.interval || right.interval) {
            fail("intervals cannot be compared", location);
        }
        Bound result;
        result.location = location;
        coerce_literals(left, right);
        try {
            result.expr = db::expr::function(distinct->negated ? db::Function::not_distinct_from
                                                               : db::Function::distinct_from,
                                             {left.expr, right.expr});
        } catch (const db::TypeError &error) {
            fail(error.what(), location);
        }
        return result;
    }
    if (const auto *nullif = node.as<ast::NullIf>()) {
        return bind_nullif(*nullif->left, *nullif->right, location, context);
    }
    if (const auto *bool_expression = node.as<ast::BoolExpr>()) {
        return bind_bool(*bool_expression, location, context);
    }
    if (const auto *test = node.as<ast::NullTest>()) {
        if (test->argument->is<ast::Row>()) {
            fail("IS NULL on rows is not supported", location);
        }
        Bound operand = bind(*test->argument, context);
        if (operand.interval.has_value()) {
            fail("IS NULL on an interval is not supported", location);
        }
        Bound result;
        result.location = location;
        result.expr = db::expr::is_null(operand.expr, test->negated);
        return result;
    }
    if (const auto *case_expression = node.as<ast::CaseExpr>()) {
        return bind_case(*case_expression, location, context);
    }
    if (const auto *coalesce = node.as<ast::Coalesce>()) {
        std::vector<db::ExprPtr> operands;
        for (const ast::ExprPtr &argument : coalesce->arguments) {
            operands.push_back(bind_value(*argument, context));
        }
        Bound result;
        result.location = location;
        try {
            result.expr = db::expr::coalesce(std::move(operands));
        } catch (const db::TypeError &error) {
            fail(error.what(), result.location);
        }
        return result;
    }
    if (const auto *cast = node.as<ast::TypeCast>()) {
        return bind_type_cast(*cast, location, context);
    }
    if (const auto *min_max = node.as<ast::MinMax>()) { // GREATEST(...) and LEAST(...)
        std::vector<db::ExprPtr> operands;
        for (const ast::ExprPtr &argument : min_max->arguments) {
            operands.push_back(bind_value(*argument, context));
        }
        Bound result;
        result.location = location;
        try {
            result.expr = db::expr::function(min_max->greatest ? db::Function::greatest : db::Function::least,
                                             std::move(operands));
        } catch (const db::TypeError &error) {
            fail(error.what(), result.location);
        }
        return result;
    }
    if (const auto *call = node.as<ast::FuncCall>()) {
        return bind_function(*call, location, context);
    }
    if (node.is<ast::SubLink>()) {
        return bind_sublink(node, context);
    }
    if (node.is<ast::CurrentDate>()) {
        // The local date when the statement is bound (DuckDB: the transaction's start).
        const std::time_t now = std::time(nullptr);
        std::tm local{};
        localtime_r(&now, &local);
        Bound result;
        result.location = location;
        result.expr = db::expr::constant(db::Value::date(
            db::date::from_civil(local.tm_year + 1900, static_cast<unsigned>(local.tm_mon + 1),
                                 static_cast<unsigned>(local.tm_mday))));
        return result;
    }
    if (node.is<ast::Row>()) {
        fail("arrays and rows are not supported", location);
    }
    if (node.is<ast::SetToDefault>()) {
        fail("unsupported expression: SetToDefault", location);
    }
    if (node.is<ast::GroupingSet>()) {
        fail("unsupported expression: GroupingSet", location);
    }
    fail(std::get<ast::Unsupported>(node.node).message, location);
}

} // namespace mx::sql::detail
