// Expression factories: DuckDB's typing rules, implicit casts, constant folding, and the text
// EXPLAIN shows. Everything here runs at bind or optimize time, so it may throw TypeError.

#include "expression_internal.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <sstream>

namespace mx::db {

namespace detail {

std::shared_ptr<Expr> ExprFactory::make(ExprKind kind, Type type) {
    std::shared_ptr<Expr> node(new Expr());
    node->_kind = kind;
    node->_type = type;
    node->_constant_tree = kind != ExprKind::column;
    return node;
}

void ExprFactory::set_children(Expr &node, std::vector<ExprPtr> children) {
    bool constant_tree = node._kind != ExprKind::column;
    for (const ExprPtr &child : children) {
        MX_ASSERT(child != nullptr, "expression child missing");
        constant_tree = constant_tree && child->is_constant_tree();
    }
    node._constant_tree = constant_tree;
    node._children = std::move(children);
}

void ExprFactory::set_like(Expr &node, std::string pattern, std::optional<char> escape) {
    node._like = LikeMatcher::compile(pattern, escape);
    node._name = std::move(pattern);
    node._escape = escape;
}

void ExprFactory::set_list(Expr &node, std::vector<Value> list) {
    node._list_has_null = false;
    for (const Value &value : list) {
        if (value.null) {
            node._list_has_null = true;
            continue;
        }
        switch (value.type.physical()) {
        case PhysicalType::u8:
        case PhysicalType::i64:
            node._sorted_i64.push_back(value.i64);
            break;
        case PhysicalType::i128:
            node._sorted_i128.push_back(value.i128);
            break;
        case PhysicalType::f64:
            node._sorted_f64.push_back(value.f64);
            break;
        case PhysicalType::string:
            node._sorted_str.push_back(value.str);
            break;
        }
    }
    auto sort_unique = [](auto &values) {
        std::sort(values.begin(), values.end());
        values.erase(std::unique(values.begin(), values.end()), values.end());
    };
    sort_unique(node._sorted_i64);
    sort_unique(node._sorted_i128);
    sort_unique(node._sorted_str);
    // NaN does not order with <; DuckDB treats NaN as equal to itself, the kernels test it apart
    std::erase_if(node._sorted_f64, [](double v) { return v != v; });
    const bool has_nan = std::any_of(list.begin(), list.end(), [](const Value &v) {
        return !v.null && v.type.physical() == PhysicalType::f64 && v.f64 != v.f64;
    });
    sort_unique(node._sorted_f64);
    if (has_nan) {
        node._sorted_f64.push_back(std::numeric_limits<double>::quiet_NaN()); // kept last
    }
    node._list = std::move(list);
}

namespace {
enum class TypeClass : std::uint8_t { exact, date, boolean, float64, string };
TypeClass class_of(const Type &type) noexcept {
    switch (type.id) {
    case TypeId::integer:
    case TypeId::bigint:
    case TypeId::decimal:
        return TypeClass::exact;
    case TypeId::date:
        return TypeClass::date;
    case TypeId::boolean:
        return TypeClass::boolean;
    case TypeId::float64:
        return TypeClass::float64;
    case TypeId::varchar:
        return TypeClass::string;
    }
    return TypeClass::exact;
}
} // namespace

bool same_representation(const Type &a, const Type &b) noexcept {
    if (a.physical() != b.physical() || class_of(a) != class_of(b)) {
        return false;
    }
    return class_of(a) != TypeClass::exact || a.scale == b.scale;
}

} // namespace detail

namespace expr {

using detail::ExprFactory;

namespace {

bool is_exact(const Type &type) noexcept {
    return type.id == TypeId::integer || type.id == TypeId::bigint || type.id == TypeId::decimal;
}
bool is_integer(const Type &type) noexcept { return type.id == TypeId::integer || type.id == TypeId::bigint; }

/// INTEGER and BIGINT take part in decimal arithmetic as DECIMAL(10,0) and DECIMAL(19,0).
Type as_decimal(const Type &type) noexcept {
    if (type.id == TypeId::integer) {
        return Type::decimal(10, 0);
    }
    if (type.id == TypeId::bigint) {
        return Type::decimal(19, 0);
    }
    return type;
}

bool is_null_constant(const ExprPtr &e) noexcept {
    return e->kind() == ExprKind::constant && e->value().null;
}

void require(const ExprPtr &e) {
    if (e == nullptr) {
        throw TypeError("expression operand missing");
    }
}

[[noreturn]] void type_error(const char *before, const Type &a, const char *middle, const Type &b) {
    std::string text(before);
    text.append(a.to_string()).append(middle).append(b.to_string());
    throw TypeError(text);
}
[[noreturn]] void type_error(const char *before, const Type &a) {
    std::string text(before);
    text.append(a.to_string());
    throw TypeError(text);
}

/// Replaces a NULL constant by a NULL of the other operand's type: an untyped NULL adapts.
void adapt_nulls(ExprPtr &a, ExprPtr &b) {
    if (is_null_constant(a) && !is_null_constant(b)) {
        a = null(b->type());
    } else if (is_null_constant(b) && !is_null_constant(a)) {
        b = null(a->type());
    }
}
ExprPtr adapt_null(ExprPtr e, Type type) { return is_null_constant(e) ? null(type) : e; }

/// Casts `e` to `type` unless it already has the same representation.
ExprPtr coerce(const ExprPtr &e, const Type &type) {
    if (is_null_constant(e)) {
        return null(type);
    }
    if (e->kind() == ExprKind::constant) {
        return e->type() == type ? e : cast(e, type);
    }
    return detail::same_representation(e->type(), type) ? e : cast(e, type);
}

/// Folds a node whose children are all constants; keeps it when folding fails at runtime.
ExprPtr fold(std::shared_ptr<Expr> node) {
    if (node->kind() == ExprKind::constant || !node->is_constant_tree()) {
        return node;
    }
    Value value;
    if (!detail::try_evaluate_constant(*node, value, nullptr)) {
        return node;
    }
    value.type = node->type();
    return constant(std::move(value));
}

void require_boolean(ExprPtr &e, const char *context) {
    require(e);
    e = adapt_null(e, Type::boolean());
    if (e->type().id != TypeId::boolean) {
        std::string text(context);
        text.append(" must be BOOLEAN, not ").append(e->type().to_string());
        throw TypeError(text);
    }
}

const char *symbol_of(ArithmeticOp op) noexcept {
    switch (op) {
    case ArithmeticOp::add:
        return "+";
    case ArithmeticOp::subtract:
        return "-";
    case ArithmeticOp::multiply:
        return "*";
    case ArithmeticOp::divide:
        return "/";
    case ArithmeticOp::modulo:
        return "%";
    }
    return "?";
}

const char *symbol_of(CompareOp op) noexcept {
    switch (op) {
    case CompareOp::equal:
        return "=";
    case CompareOp::not_equal:
        return "<>";
    case CompareOp::less:
        return "<";
    case CompareOp::less_equal:
        return "<=";
    case CompareOp::greater:
        return ">";
    case CompareOp::greater_equal:
        return ">=";
    }
    return "?";
}

CompareOp negate_op(CompareOp op) noexcept {
    switch (op) {
    case CompareOp::equal:
        return CompareOp::not_equal;
    case CompareOp::not_equal:
        return CompareOp::equal;
    case CompareOp::less:
        return CompareOp::greater_equal;
    case CompareOp::less_equal:
        return CompareOp::greater;
    case CompareOp::greater:
        return CompareOp::less_equal;
    case CompareOp::greater_equal:
        return CompareOp::less;
    }
    return op;
}

std::uint8_t clamp_precision(int precision) noexcept {
    return static_cast<std::uint8_t>(std::min<int>(precision, decimal::max_precision));
}

ExprPtr make_arithmetic(ArithmeticOp op, Type type, ExprPtr left, ExprPtr right, bool check) {
    auto node = ExprFactory::make(ExprKind::arithmetic, type);
    ExprFactory::set_children(*node, {std::move(left), std::move(right)});
    ExprFactory::set_arithmetic(*node, op, check);
    return fold(std::move(node));
}

} // namespace

ExprPtr column(std::uint32_t index, Type type, std::string name) {
    auto node = ExprFactory::make(ExprKind::column, type);
    ExprFactory::set_column_index(*node, index);
    ExprFactory::set_name(*node, std::move(name));
    return node;
}

ExprPtr constant(Value value) {
    if (value.type.id == TypeId::decimal &&
        (value.type.precision == 0 || value.type.precision > decimal::max_precision ||
         value.type.scale > value.type.precision)) {
        type_error("invalid decimal type ", value.type);
    }
    auto node = ExprFactory::make(ExprKind::constant, value.type);
    ExprFactory::set_value(*node, std::move(value));
    return node;
}

ExprPtr null(Type type) { return constant(Value::null_of(type)); }

Type common_type(const Type &a, const Type &b, const char *what) {
    if (a.id == b.id && a.id != TypeId::decimal) {
        return a.id == TypeId::varchar ? Type::varchar(a.length == b.length ? a.length : 0) : a;
    }
    if (is_exact(a) && is_exact(b)) {
        if (a.id != TypeId::decimal && b.id != TypeId::decimal) {
            return Type::bigint(); // INTEGER with BIGINT
        }
        const Type da = as_decimal(a);
        const Type db = as_decimal(b);
        const int digits = std::max(da.precision - da.scale, db.precision - db.scale);
        const auto scale = std::max(da.scale, db.scale);
        return Type::decimal(clamp_precision(digits + scale), scale);
    }
    if (a.is_numeric() && b.is_numeric()) {
        return Type::float64();
    }
    std::string text("cannot ");
    text.append(what).append(" ");
    type_error(text.c_str(), a, " with ", b);
}

namespace {
ExprPtr typed_arithmetic(ArithmeticOp op, const ExprPtr &left, const ExprPtr &right);

/// The type CASE and COALESCE combine their operands into (DuckDB's rule): common_type, except
/// that DECIMALs whose integer digits plus largest scale exceed 38 digits give up scale digits,
/// since a value must not lose integer digits: COALESCE(DECIMAL(18,4), DECIMAL(38,0)) is
/// DECIMAL(38,0). Comparisons keep common_type, which compares such decimals exactly.
Type combined_type(const Type &a, const Type &b) {
    if (a.id == TypeId::decimal || b.id == TypeId::decimal) {
        if (is_exact(a) && is_exact(b)) {
            const Type da = as_decimal(a);
            const Type db = as_decimal(b);
            const int digits = std::max(da.precision - da.scale, db.precision - db.scale);
            int scale = std::max(da.scale, db.scale);
            if (digits + scale > decimal::max_precision) {
                scale = decimal::max_precision - digits;
            }
            return Type::decimal(static_cast<std::uint8_t>(digits + scale), static_cast<std::uint8_t>(scale));
        }
    }
    return common_type(a, b, "combine");
}
} // namespace

ExprPtr arithmetic(ArithmeticOp op, ExprPtr left, ExprPtr right) {
    require(left);
    require(right);
    try {
        return typed_arithmetic(op, left, right);
    } catch (const TypeError &) {
        // a NULL literal takes whatever type makes the operation valid (DATE NULL + 1 stays DATE)
        if (!is_null_constant(left) && !is_null_constant(right)) {
            throw;
        }
    }
    if (is_null_constant(left) && is_null_constant(right)) {
        return typed_arithmetic(op, null(Type::integer()), null(Type::integer()));
    }
    adapt_nulls(left, right);
    return typed_arithmetic(op, left, right);
}

namespace {
ExprPtr typed_arithmetic(ArithmeticOp op, const ExprPtr &left, const ExprPtr &right) {
    const Type lt = left->type();
    const Type rt = right->type();
    auto undefined = [&]() {
        std::string text("operator ");
        text.append(symbol_of(op))
            .append(" is not defined for ")
            .append(lt.to_string())
            .append(" and ")
            .append(rt.to_string());
        return TypeError(text);
    };

    if (lt.id == TypeId::date || rt.id == TypeId::date) {
        if (lt.id == TypeId::date && rt.id == TypeId::date && op == ArithmeticOp::subtract) {
            return make_arithmetic(op, Type::bigint(), left, right, true); // days between
        }
        const bool date_plus_int = lt.id == TypeId::date && is_integer(rt) &&
                                   (op == ArithmeticOp::add || op == ArithmeticOp::subtract);
        const bool int_plus_date = is_integer(lt) && rt.id == TypeId::date && op == ArithmeticOp::add;
        if (date_plus_int || int_plus_date) {
            return make_arithmetic(op, Type::date(), left, right, true);
        }
        throw undefined();
    }
    if (!lt.is_numeric() || !rt.is_numeric()) {
        throw undefined();
    }
    if (op == ArithmeticOp::divide || lt.id == TypeId::float64 || rt.id == TypeId::float64) {
        // DuckDB: '/' is always floating-point division, and DOUBLE absorbs every numeric type
        return make_arithmetic(op, Type::float64(), coerce(left, Type::float64()),
                               coerce(right, Type::float64()), false);
    }
    if (is_integer(lt) && is_integer(rt)) {
        const Type type =
            lt.id == TypeId::integer && rt.id == TypeId::integer ? Type::integer() : Type::bigint();
        return make_arithmetic(op, type, left, right, true);
    }

    // DECIMAL arithmetic, DuckDB's BindDecimal* rules
    const Type dl = as_decimal(lt);
    const Type dr = as_decimal(rt);
    const int max_width = std::max(dl.precision, dr.precision);
    switch (op) {
    case ArithmeticOp::add:
    case ArithmeticOp::subtract: {
        const auto scale = std::max(dl.scale, dr.scale);
        const int digits = std::max(dl.precision - dl.scale, dr.precision - dr.scale);
        int width = digits + scale + 1;
        bool check = false;
        if (width > decimal::max_int64_precision && max_width <= decimal::max_int64_precision) {
            width = decimal::max_int64_precision; // DuckDB stays in int64 and checks instead
            check = true;
        }
        if (width > decimal::max_precision) {
            width = decimal::max_precision;
            check = true;
        }
        const Type type = Type::decimal(static_cast<std::uint8_t>(width), scale);
        // operands with another scale are cast to the result type, as DuckDB does
        ExprPtr l = dl.scale == scale ? left : cast(left, type);
        ExprPtr r = dr.scale == scale ? right : cast(right, type);
        return make_arithmetic(op, type, std::move(l), std::move(r), check);
    }
    case ArithmeticOp::multiply: {
        const int scale = dl.scale + dr.scale;
        int width = dl.precision + dr.precision;
        bool check = false;
        if (scale > decimal::max_precision) {
            type_error("DECIMAL multiplication needs a scale above 38: ", lt, " * ", rt);
        }
        if (width > decimal::max_int64_precision && max_width <= decimal::max_int64_precision &&
            scale < decimal::max_int64_precision) {
            width = decimal::max_int64_precision;
            check = true;
        }
        if (width > decimal::max_precision) {
            width = decimal::max_precision;
            check = true;
        }
        return make_arithmetic(
            op, Type::decimal(static_cast<std::uint8_t>(width), static_cast<std::uint8_t>(scale)), left,
            right, check);
    }
    case ArithmeticOp::modulo: {
        // DuckDB: DECIMAL % DECIMAL needing more than 38 digits is computed in DOUBLE.
        const int digits = std::max(dl.precision - dl.scale, dr.precision - dr.scale);
        const Type type = digits + std::max(dl.scale, dr.scale) > decimal::max_precision
                              ? Type::float64()
                              : common_type(dl, dr, "combine");
        return make_arithmetic(op, type, coerce(left, type), coerce(right, type), false);
    }
    case ArithmeticOp::divide:
        break;
    }
    throw undefined();
}
} // namespace

ExprPtr add(ExprPtr left, ExprPtr right) {
    return arithmetic(ArithmeticOp::add, std::move(left), std::move(right));
}
ExprPtr subtract(ExprPtr left, ExprPtr right) {
    return arithmetic(ArithmeticOp::subtract, std::move(left), std::move(right));
}
ExprPtr multiply(ExprPtr left, ExprPtr right) {
    return arithmetic(ArithmeticOp::multiply, std::move(left), std::move(right));
}
ExprPtr divide(ExprPtr left, ExprPtr right) {
    return arithmetic(ArithmeticOp::divide, std::move(left), std::move(right));
}
ExprPtr modulo(ExprPtr left, ExprPtr right) {
    return arithmetic(ArithmeticOp::modulo, std::move(left), std::move(right));
}

ExprPtr negate(ExprPtr operand) {
    require(operand);
    const Type type = operand->type();
    if (!type.is_numeric()) {
        type_error("operator - is not defined for ", type);
    }
    auto node = ExprFactory::make(ExprKind::negate, type);
    ExprFactory::set_children(*node, {std::move(operand)});
    ExprFactory::set_check_overflow(*node, is_integer(type));
    return fold(std::move(node));
}

ExprPtr compare(CompareOp op, ExprPtr left, ExprPtr right) {
    require(left);
    require(right);
    adapt_nulls(left, right);
    const Type type = common_type(left->type(), right->type(), "compare");
    if (is_null_constant(left) || is_null_constant(right)) {
        return null(Type::boolean());
    }
    auto node = ExprFactory::make(ExprKind::compare, Type::boolean());
    ExprFactory::set_children(*node, {coerce(left, type), coerce(right, type)});
    ExprFactory::set_compare(*node, op);
    return fold(std::move(node));
}

ExprPtr equal(ExprPtr left, ExprPtr right) {
    return compare(CompareOp::equal, std::move(left), std::move(right));
}
ExprPtr not_equal(ExprPtr left, ExprPtr right) {
    return compare(CompareOp::not_equal, std::move(left), std::move(right));
}
ExprPtr less(ExprPtr left, ExprPtr right) {
    return compare(CompareOp::less, std::move(left), std::move(right));
}
ExprPtr less_equal(ExprPtr left, ExprPtr right) {
    return compare(CompareOp::less_equal, std::move(left), std::move(right));
}
ExprPtr greater(ExprPtr left, ExprPtr right) {
    return compare(CompareOp::greater, std::move(left), std::move(right));
}
ExprPtr greater_equal(ExprPtr left, ExprPtr right) {
    return compare(CompareOp::greater_equal, std::move(left), std::move(right));
}

ExprPtr between(ExprPtr operand, ExprPtr low, ExprPtr high, bool negated) {
    require(operand);
    if (negated) {
        return logical_or(less(operand, std::move(low)), greater(operand, std::move(high)));
    }
    return logical_and(greater_equal(operand, std::move(low)), less_equal(operand, std::move(high)));
}

namespace {
/// AND (is_and) or OR: flattens nested nodes of the same kind and drops neutral constants.
ExprPtr conjunction(bool is_and, std::vector<ExprPtr> operands) {
    const ExprKind kind = is_and ? ExprKind::logical_and : ExprKind::logical_or;
    const char *context = is_and ? "operand of AND" : "operand of OR";
    std::vector<ExprPtr> flat;
    bool has_null = false;
    for (ExprPtr &operand : operands) {
        require_boolean(operand, context);
        if (operand->kind() == kind) {
            flat.insert(flat.end(), operand->children().begin(), operand->children().end());
        } else if (operand->kind() == ExprKind::constant) {
            if (operand->value().null) {
                has_null = true;
            } else if ((operand->value().i64 != 0) != is_and) {
                return constant(Value::boolean(!is_and)); // FALSE decides AND, TRUE decides OR
            }
        } else {
            flat.push_back(std::move(operand));
        }
    }
    if (has_null) {
        flat.push_back(null(Type::boolean()));
    }
    if (flat.empty()) {
        return constant(Value::boolean(is_and));
    }
    if (flat.size() == 1) {
        return flat.front();
    }
    auto node = ExprFactory::make(kind, Type::boolean());
    ExprFactory::set_children(*node, std::move(flat));
    return fold(std::move(node));
}
} // namespace

ExprPtr logical_and(std::vector<ExprPtr> operands) { return conjunction(true, std::move(operands)); }
ExprPtr logical_and(ExprPtr left, ExprPtr right) {
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(left));
    operands.push_back(std::move(right));
    return conjunction(true, std::move(operands));
}
ExprPtr logical_or(std::vector<ExprPtr> operands) { return conjunction(false, std::move(operands)); }
ExprPtr logical_or(ExprPtr left, ExprPtr right) {
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(left));
    operands.push_back(std::move(right));
    return conjunction(false, std::move(operands));
}

ExprPtr logical_not(ExprPtr operand) {
    require_boolean(operand, "operand of NOT");
    // Rewrites that hold in three-valued logic and keep filters on their fast paths.
    switch (operand->kind()) {
    case ExprKind::compare: {
        auto node = ExprFactory::copy(*operand);
        ExprFactory::set_compare(*node, negate_op(operand->compare_op()));
        return node;
    }
    case ExprKind::like:
    case ExprKind::in_list:
    case ExprKind::is_null: {
        auto node = ExprFactory::copy(*operand);
        ExprFactory::set_negated(*node, !operand->negated());
        return node;
    }
    case ExprKind::logical_not:
        return operand->children().front();
    default:
        break;
    }
    auto node = ExprFactory::make(ExprKind::logical_not, Type::boolean());
    ExprFactory::set_children(*node, {std::move(operand)});
    return fold(std::move(node));
}

ExprPtr is_null(ExprPtr operand, bool negated) {
    require(operand);
    auto node = ExprFactory::make(ExprKind::is_null, Type::boolean());
    ExprFactory::set_children(*node, {std::move(operand)});
    ExprFactory::set_negated(*node, negated);
    return fold(std::move(node));
}

ExprPtr in_list(ExprPtr operand, std::vector<Value> list, bool negated) {
    require(operand);
    if (list.empty()) {
        throw TypeError("IN list must not be empty");
    }
    std::optional<Type> type;
    if (!is_null_constant(operand)) {
        type = operand->type();
    }
    for (const Value &value : list) {
        if (!value.null) {
            type = type.has_value() ? common_type(*type, value.type, "compare") : value.type;
        }
    }
    if (!type.has_value() || is_null_constant(operand)) {
        return null(Type::boolean());
    }
    std::vector<Value> converted;
    converted.reserve(list.size());
    for (Value &value : list) {
        if (value.null) {
            converted.push_back(Value::null_of(*type));
            continue;
        }
        const ExprPtr folded = coerce(constant(std::move(value)), *type);
        if (folded->kind() != ExprKind::constant) {
            std::string text("cannot convert IN list value to ");
            text.append(type->to_string());
            throw TypeError(text);
        }
        converted.push_back(folded->value());
    }
    auto node = ExprFactory::make(ExprKind::in_list, Type::boolean());
    ExprFactory::set_children(*node, {coerce(operand, *type)});
    ExprFactory::set_list(*node, std::move(converted));
    ExprFactory::set_negated(*node, negated);
    return fold(std::move(node));
}

ExprPtr like(ExprPtr operand, std::string pattern, bool negated, std::optional<char> escape) {
    require(operand);
    operand = adapt_null(operand, Type::varchar());
    if (operand->type().id != TypeId::varchar) {
        type_error("LIKE needs a VARCHAR operand, not ", operand->type());
    }
    auto node = ExprFactory::make(ExprKind::like, Type::boolean());
    ExprFactory::set_children(*node, {std::move(operand)});
    ExprFactory::set_like(*node, std::move(pattern), escape);
    ExprFactory::set_negated(*node, negated);
    return fold(std::move(node));
}

ExprPtr case_when(std::vector<std::pair<ExprPtr, ExprPtr>> branches, ExprPtr otherwise) {
    if (branches.empty()) {
        throw TypeError("CASE needs at least one WHEN branch");
    }
    std::optional<Type> type;
    auto widen = [&](const ExprPtr &result) {
        require(result);
        if (!is_null_constant(result)) {
            type = type.has_value() ? combined_type(*type, result->type()) : result->type();
        }
    };
    for (auto &[condition, result] : branches) {
        require_boolean(condition, "CASE condition");
        widen(result);
    }
    if (otherwise != nullptr) {
        widen(otherwise);
    }
    // only NULL results: keep the type they were given
    const Type result_type = type.value_or(branches.front().second->type());

    std::vector<ExprPtr> children;
    ExprPtr fallback;
    for (auto &[condition, result] : branches) {
        if (condition->kind() == ExprKind::constant) {
            if (condition->value().null || condition->value().i64 == 0) {
                continue; // never taken
            }
            fallback = coerce(result, result_type); // always taken: later branches are dead
            break;
        }
        children.push_back(condition);
        children.push_back(coerce(result, result_type));
    }
    if (fallback == nullptr) {
        fallback = otherwise != nullptr ? coerce(otherwise, result_type) : null(result_type);
    }
    if (children.empty()) {
        return fallback;
    }
    const bool has_else = !is_null_constant(fallback);
    if (has_else) {
        children.push_back(std::move(fallback));
    }
    auto node = ExprFactory::make(ExprKind::case_when, result_type);
    ExprFactory::set_children(*node, std::move(children));
    ExprFactory::set_negated(*node, has_else);
    return fold(std::move(node));
}

ExprPtr simple_case(ExprPtr operand, std::vector<std::pair<ExprPtr, ExprPtr>> branches, ExprPtr otherwise) {
    require(operand);
    for (auto &[value, result] : branches) {
        value = equal(operand, std::move(value));
    }
    return case_when(std::move(branches), std::move(otherwise));
}

ExprPtr coalesce(std::vector<ExprPtr> operands) {
    if (operands.empty()) {
        throw TypeError("COALESCE needs at least one operand");
    }
    std::optional<Type> type;
    for (const ExprPtr &operand : operands) {
        require(operand);
        if (!is_null_constant(operand)) {
            type = type.has_value() ? combined_type(*type, operand->type()) : operand->type();
        }
    }
    if (!type.has_value()) {
        return operands.front();
    }
    std::vector<ExprPtr> children;
    for (const ExprPtr &operand : operands) {
        if (is_null_constant(operand)) {
            continue;
        }
        children.push_back(coerce(operand, *type));
        if (operand->kind() == ExprKind::constant) {
            break; // a non-NULL constant ends the search
        }
    }
    if (children.size() == 1) {
        return children.front();
    }
    auto node = ExprFactory::make(ExprKind::coalesce, *type);
    ExprFactory::set_children(*node, std::move(children));
    return fold(std::move(node));
}

ExprPtr cast(ExprPtr operand, Type target) {
    require(operand);
    const Type from = operand->type();
    if (from == target) {
        return operand;
    }
    if (target.id == TypeId::decimal && (target.precision == 0 || target.precision > decimal::max_precision ||
                                         target.scale > target.precision)) {
        type_error("invalid decimal type ", target);
    }
    if (is_null_constant(operand)) {
        return null(target);
    }
    const bool date_involved = (from.id == TypeId::date) != (target.id == TypeId::date);
    const bool boolean_date = (from.id == TypeId::boolean && target.id == TypeId::date) ||
                              (from.id == TypeId::date && target.id == TypeId::boolean);
    if ((date_involved && from.id != TypeId::varchar && target.id != TypeId::varchar) || boolean_date) {
        type_error("cannot cast ", from, " to ", target);
    }
    auto node = ExprFactory::make(ExprKind::cast, target);
    ExprFactory::set_children(*node, {std::move(operand)});
    return fold(std::move(node));
}

ExprPtr extract(DatePart part, ExprPtr operand) {
    require(operand);
    operand = adapt_null(operand, Type::date());
    if (operand->type().id != TypeId::date) {
        type_error("EXTRACT needs a DATE, not ", operand->type());
    }
    const bool fractional = part == DatePart::epoch || part == DatePart::julian;
    auto node = ExprFactory::make(ExprKind::extract, fractional ? Type::float64() : Type::bigint());
    ExprFactory::set_children(*node, {std::move(operand)});
    ExprFactory::set_date_part(*node, part);
    return fold(std::move(node));
}

namespace {

/// A constant VARCHAR argument's text (round's digits, patterns, formats); TypeError otherwise.
std::string constant_text(const ExprPtr &e, const char *what) {
    if (e->kind() != ExprKind::constant || e->value().null || e->type().id != TypeId::varchar) {
        throw TypeError(std::string(what) + " must be a string constant");
    }
    return e->value().str;
}

/// strftime's specifiers that TunaDB prints (DuckDB's for dates; the time ones print midnight).
bool valid_strftime_format(std::string_view format) noexcept {
    for (std::size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%') {
            continue;
        }
        if (++i == format.size()) {
            return false;
        }
        if (format[i] == '-' && i + 1 < format.size()) {
            ++i; // %-d, %-m, ...: without padding
            if (std::string_view("dmjHIMSy").find(format[i]) == std::string_view::npos) {
                return false;
            }
            continue;
        }
        if (std::string_view("aAbBdHIjmMpSuUVwWyYG%").find(format[i]) == std::string_view::npos) {
            return false;
        }
    }
    return true;
}

} // namespace

ExprPtr function(Function which, std::vector<ExprPtr> arguments) {
    for (const ExprPtr &argument : arguments) {
        require(argument);
    }
    const std::string name = name_of(which);
    const auto arity = [&](std::size_t low, std::size_t high) {
        if (arguments.size() < low || arguments.size() > high) {
            std::string text = name + "() takes ";
            text.append(low == high
                            ? std::to_string(low)
                            : std::to_string(low) + (high > 64 ? " or more" : " to " + std::to_string(high)));
            throw TypeError(text.append(low == 1 && high == 1 ? " argument" : " arguments"));
        }
    };
    const auto strings = [&](std::size_t from) {
        for (std::size_t i = from; i < arguments.size(); ++i) {
            arguments[i] = adapt_null(arguments[i], Type::varchar());
            if (arguments[i]->type().id != TypeId::varchar) {
                type_error((name + "() needs VARCHAR arguments, not ").c_str(), arguments[i]->type());
            }
        }
    };
    const auto numeric = [&](std::size_t i) {
        arguments[i] = adapt_null(arguments[i], Type::integer());
        if (!arguments[i]->type().is_numeric()) {
            type_error((name + "() needs a number, not ").c_str(), arguments[i]->type());
        }
    };
    const auto doubles = [&]() {
        for (std::size_t i = 0; i < arguments.size(); ++i) {
            numeric(i);
            arguments[i] = coerce(arguments[i], Type::float64());
        }
    };
    const auto date_argument = [&](std::size_t i) {
        arguments[i] = adapt_null(arguments[i], Type::date());
        if (arguments[i]->type().id != TypeId::date) {
            type_error((name + "() needs a DATE, not ").c_str(), arguments[i]->type());
        }
    };
    constexpr std::size_t many = 1000;
    Type result = Type::varchar();
    std::shared_ptr<Expr> node;
    std::int64_t digits = 0;
    DatePart part = DatePart::year;
    std::shared_ptr<const detail::CompiledRegex> regex;
    switch (which) {
    case Function::upper:
    case Function::lower:
        arity(1, 1);
        strings(0);
        break;
    case Function::length:
        arity(1, 1);
        strings(0);
        result = Type::bigint();
        break;
    case Function::trim:
    case Function::ltrim:
    case Function::rtrim:
        arity(1, 2);
        strings(0);
        break;
    case Function::replace:
        arity(3, 3);
        strings(0);
        break;
    case Function::concat:
    case Function::concat_strict:
        arity(which == Function::concat ? 1 : 2, which == Function::concat ? many : 2);
        for (ExprPtr &argument : arguments) {
            argument = coerce(argument, Type::varchar());
        }
        break;
    case Function::starts_with:
        arity(2, 2);
        strings(0);
        result = Type::boolean();
        break;
    case Function::regexp_matches: {
        arity(2, 3);
        strings(0);
        const std::string pattern = constant_text(arguments[1], "the pattern of regexp_matches()");
        const std::string options =
            arguments.size() > 2 ? constant_text(arguments[2], "the options of regexp_matches()") : "";
        regex = detail::CompiledRegex::compile(pattern, options);
        arguments.resize(1);
        result = Type::boolean();
        break;
    }
    case Function::abs:
        arity(1, 1);
        numeric(0);
        result = arguments[0]->type();
        break;
    case Function::ceil:
    case Function::floor:
        arity(1, 1);
        numeric(0);
        if (arguments[0]->type().id == TypeId::decimal) {
            result = Type::decimal(arguments[0]->type().precision, 0);
        } else {
            arguments[0] = coerce(arguments[0], Type::float64());
            result = Type::float64();
        }
        break;
    case Function::round: {
        arity(1, 2);
        numeric(0);
        if (arguments.size() == 2) {
            const ExprPtr &n = arguments[1];
            if (n->kind() != ExprKind::constant || n->value().null ||
                (n->type().id != TypeId::integer && n->type().id != TypeId::bigint)) {
                throw TypeError("the digits of round() must be an integer constant");
            }
            digits = n->value().i64;
            arguments.resize(1);
        }
        const Type input = arguments[0]->type();
        if (input.id == TypeId::decimal) {
            const auto scale = static_cast<std::uint8_t>(std::clamp<std::int64_t>(digits, 0, input.scale));
            result = Type::decimal(input.precision, scale);
        } else {
            result = input;
        }
        break;
    }
    case Function::sqrt:
    case Function::ln:
    case Function::exp:
        arity(1, 1);
        doubles();
        result = Type::float64();
        break;
    case Function::power:
        arity(2, 2);
        doubles();
        result = Type::float64();
        break;
    case Function::greatest:
    case Function::least: {
        arity(1, many);
        std::optional<Type> type;
        for (const ExprPtr &argument : arguments) {
            if (!is_null_constant(argument)) {
                type = type.has_value() ? combined_type(*type, argument->type()) : argument->type();
            }
        }
        result = type.value_or(Type::integer());
        for (ExprPtr &argument : arguments) {
            argument = coerce(argument, result);
        }
        break;
    }
    case Function::distinct_from:
    case Function::not_distinct_from: {
        arity(2, 2);
        adapt_nulls(arguments[0], arguments[1]);
        if (is_null_constant(arguments[0]) && is_null_constant(arguments[1])) {
            return constant(Value::boolean(which == Function::not_distinct_from));
        }
        const Type type = common_type(arguments[0]->type(), arguments[1]->type(), "compare");
        arguments[0] = coerce(arguments[0], type);
        arguments[1] = coerce(arguments[1], type);
        result = Type::boolean();
        break;
    }
    case Function::date_trunc: {
        arity(2, 2);
        const std::string text = constant_text(arguments[0], "the part of date_trunc()");
        const auto parsed = parse_date_part(text);
        static constexpr DatePart truncatable[] = {
            DatePart::year,   DatePart::quarter,     DatePart::month,      DatePart::week, DatePart::day,
            DatePart::decade, DatePart::century,     DatePart::millennium, DatePart::hour, DatePart::minute,
            DatePart::second, DatePart::millisecond, DatePart::microsecond};
        if (!parsed.has_value() ||
            std::find(std::begin(truncatable), std::end(truncatable), *parsed) == std::end(truncatable)) {
            throw TypeError("date_trunc() cannot truncate to \"" + text + "\"");
        }
        part = *parsed;
        date_argument(1);
        arguments.erase(arguments.begin());
        result = Type::date();
        break;
    }
    case Function::strftime: {
        arity(2, 2);
        date_argument(0);
        const std::string format = constant_text(arguments[1], "the format of strftime()");
        if (!valid_strftime_format(format)) {
            throw TypeError("strftime() does not understand the format \"" + format + "\"");
        }
        break;
    }
    }
    node = ExprFactory::make(ExprKind::function, result);
    ExprFactory::set_children(*node, std::move(arguments));
    ExprFactory::set_function(*node, which, digits, std::move(regex));
    ExprFactory::set_date_part(*node, part);
    return fold(std::move(node));
}

ExprPtr substring(ExprPtr string, ExprPtr from, ExprPtr length) {
    require(string);
    require(from);
    string = adapt_null(string, Type::varchar());
    if (string->type().id != TypeId::varchar) {
        type_error("SUBSTRING needs a VARCHAR, not ", string->type());
    }
    std::vector<ExprPtr> children{std::move(string)};
    auto position = [&](ExprPtr e) {
        e = adapt_null(e, Type::bigint());
        if (!is_integer(e->type())) {
            type_error("SUBSTRING positions must be INTEGER or BIGINT, not ", e->type());
        }
        children.push_back(std::move(e));
    };
    position(std::move(from));
    if (length != nullptr) {
        position(std::move(length));
    }
    auto node = ExprFactory::make(ExprKind::substring, Type::varchar());
    ExprFactory::set_children(*node, std::move(children));
    return fold(std::move(node));
}

ExprPtr add_interval(ExprPtr date, Interval interval) {
    require(date);
    date = adapt_null(date, Type::date());
    if (date->type().id != TypeId::date) {
        type_error("INTERVAL arithmetic needs a DATE, not ", date->type());
    }
    auto node = ExprFactory::make(ExprKind::add_interval, Type::date());
    ExprFactory::set_children(*node, {std::move(date)});
    ExprFactory::set_interval(*node, interval);
    return fold(std::move(node));
}

ExprPtr subtract_interval(ExprPtr date, Interval interval) {
    return add_interval(std::move(date), Interval{-interval.months, -interval.days});
}

ExprPtr remap_columns(const ExprPtr &root, const std::function<std::uint32_t(std::uint32_t)> &map) {
    if (root->kind() == ExprKind::column) {
        auto node = ExprFactory::copy(*root);
        ExprFactory::set_column_index(*node, map(root->column_index()));
        return node;
    }
    if (root->is_constant_tree()) {
        return root;
    }
    std::vector<ExprPtr> children;
    children.reserve(root->children().size());
    for (const ExprPtr &child : root->children()) {
        children.push_back(remap_columns(child, map));
    }
    auto node = ExprFactory::copy(*root);
    ExprFactory::set_children(*node, std::move(children));
    return node;
}

void collect_columns(const Expr &root, std::vector<std::uint32_t> &out) {
    if (root.kind() == ExprKind::column) {
        out.push_back(root.column_index());
    }
    for (const ExprPtr &child : root.children()) {
        collect_columns(*child, out);
    }
}

} // namespace expr

namespace {

std::string quoted(std::string_view text) {
    std::string out("'");
    for (const char c : text) {
        out.push_back(c);
        if (c == '\'') {
            out.push_back('\'');
        }
    }
    out.push_back('\'');
    return out;
}

std::string literal(const Value &value) {
    if (value.null) {
        return "NULL";
    }
    switch (value.type.id) {
    case TypeId::varchar:
        return quoted(value.str);
    case TypeId::date:
        return std::string("DATE ").append(quoted(date::format(value.i64)));
    case TypeId::boolean:
        return value.i64 != 0 ? "TRUE" : "FALSE";
    case TypeId::float64:
        return detail::double_to_text(value.f64);
    default:
        return value.to_string();
    }
}

void print(const Expr &e, std::ostringstream &out) {
    const auto &children = e.children();
    auto list = [&](std::size_t first, const char *separator) {
        for (std::size_t i = first; i < children.size(); ++i) {
            if (i > first) {
                out << separator;
            }
            print(*children[i], out);
        }
    };
    switch (e.kind()) {
    case ExprKind::column:
        if (e.name().empty()) {
            out << '#' << e.column_index();
        } else {
            out << e.name();
        }
        break;
    case ExprKind::constant:
        out << literal(e.value());
        break;
    case ExprKind::arithmetic:
        out << '(';
        print(*children[0], out);
        out << ' ' << expr::symbol_of(e.arithmetic_op()) << ' ';
        print(*children[1], out);
        out << ')';
        break;
    case ExprKind::negate:
        out << "(- ";
        print(*children[0], out);
        out << ')';
        break;
    case ExprKind::compare:
        out << '(';
        print(*children[0], out);
        out << ' ' << expr::symbol_of(e.compare_op()) << ' ';
        print(*children[1], out);
        out << ')';
        break;
    case ExprKind::logical_and:
    case ExprKind::logical_or:
        out << '(';
        list(0, e.kind() == ExprKind::logical_and ? " AND " : " OR ");
        out << ')';
        break;
    case ExprKind::logical_not:
        out << "(NOT ";
        print(*children[0], out);
        out << ')';
        break;
    case ExprKind::is_null:
        out << '(';
        print(*children[0], out);
        out << (e.negated() ? " IS NOT NULL)" : " IS NULL)");
        break;
    case ExprKind::in_list:
        out << '(';
        print(*children[0], out);
        out << (e.negated() ? " NOT IN (" : " IN (");
        for (std::size_t i = 0; i < e.list().size(); ++i) {
            out << (i > 0 ? ", " : "") << literal(e.list()[i]);
        }
        out << "))";
        break;
    case ExprKind::like:
        out << '(';
        print(*children[0], out);
        out << (e.negated() ? " NOT LIKE " : " LIKE ") << quoted(e.pattern());
        if (e.escape().has_value()) {
            const char escape = *e.escape();
            out << " ESCAPE " << quoted(std::string_view(&escape, 1));
        }
        out << ')';
        break;
    case ExprKind::case_when: {
        out << "CASE";
        const std::size_t pairs = (children.size() - (e.has_else() ? 1 : 0)) / 2;
        for (std::size_t i = 0; i < pairs; ++i) {
            out << " WHEN ";
            print(*children[2 * i], out);
            out << " THEN ";
            print(*children[2 * i + 1], out);
        }
        if (e.has_else()) {
            out << " ELSE ";
            print(*children.back(), out);
        }
        out << " END";
        break;
    }
    case ExprKind::cast:
        out << "CAST(";
        print(*children[0], out);
        out << " AS " << e.type().to_string() << ')';
        break;
    case ExprKind::extract: {
        std::string part = name_of(e.date_part());
        std::transform(part.begin(), part.end(), part.begin(),
                       [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); });
        out << "EXTRACT(" << part << " FROM ";
        print(*children[0], out);
        out << ')';
        break;
    }
    case ExprKind::substring:
        out << "SUBSTRING(";
        list(0, ", ");
        out << ')';
        break;
    case ExprKind::add_interval:
        out << '(';
        print(*children[0], out);
        out << " + INTERVAL '" << e.interval().months << " months " << e.interval().days << " days')";
        break;
    case ExprKind::coalesce:
        out << "COALESCE(";
        list(0, ", ");
        out << ')';
        break;
    case ExprKind::function:
        if (e.function() == Function::concat_strict) {
            out << '(';
            list(0, " || ");
            out << ')';
            break;
        }
        if (e.function() == Function::distinct_from || e.function() == Function::not_distinct_from) {
            out << '(';
            print(*children[0], out);
            out << (e.function() == Function::distinct_from ? " IS DISTINCT FROM "
                                                            : " IS NOT DISTINCT FROM ");
            print(*children[1], out);
            out << ')';
            break;
        }
        out << name_of(e.function()) << '(';
        if (e.function() == Function::date_trunc) {
            out << quoted(name_of(e.date_part())) << ", ";
        }
        list(0, ", ");
        if (e.function() == Function::round) {
            out << ", " << e.digits();
        }
        if (e.function() == Function::regexp_matches) {
            out << ", " << quoted(e.regex()->pattern);
            if (!e.regex()->options.empty()) {
                out << ", " << quoted(e.regex()->options);
            }
        }
        out << ')';
        break;
    }
}

} // namespace

std::string to_string(const Expr &expression) {
    std::ostringstream out;
    print(expression, out);
    return out.str();
}

} // namespace mx::db
