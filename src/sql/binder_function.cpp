// Function calls: scalar functions, aggregates (DISTINCT, FILTER, ORDER BY) and window
// functions with their frames.

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

} // namespace

bool Binder::contains_window(const ast::Expr &node, int depth) {
    if (depth > max_expression_depth || node.is<ast::SubLink>()) {
        return false;
    }
    if (const auto *call = node.as<ast::FuncCall>(); call != nullptr && call->over != nullptr) {
        return true;
    }
    bool found = false;
    ast::for_each_child(node,
                        [&](const ast::Expr &child) { found = found || contains_window(child, depth + 1); });
    return found;
}

bool Binder::contains_aggregate(const ast::Expr &node, int depth) {
    if (depth > max_expression_depth || node.is<ast::SubLink>()) {
        return false;
    }
    if (const auto *call = node.as<ast::FuncCall>();
        call != nullptr && is_aggregate_name(call->name) && call->over == nullptr) {
        return true;
    }
    bool found = false;
    ast::for_each_child(
        node, [&](const ast::Expr &child) { found = found || contains_aggregate(child, depth + 1); });
    return found;
}

bool Binder::contains_aggregate(const ast::SelectStmt &select) {
    const auto in = [](const ast::ExprPtr &expression) {
        return expression != nullptr && contains_aggregate(*expression, 0);
    };
    const auto in_list = [&](const std::vector<ast::ExprPtr> &list) {
        return std::any_of(list.begin(), list.end(), in);
    };
    const auto in_from = [](const ast::FromItem &item, const auto &self) -> bool {
        if (const auto *derived = std::get_if<ast::RangeSubselect>(&item.node)) {
            return derived->query != nullptr && contains_aggregate(*derived->query);
        }
        if (const auto *join = std::get_if<ast::JoinExpr>(&item.node)) {
            return self(*join->left, self) || self(*join->right, self) ||
                   (join->condition != nullptr && contains_aggregate(*join->condition, 0));
        }
        return false;
    };
    if (select.first != nullptr && contains_aggregate(*select.first)) {
        return true;
    }
    for (const ast::SetStep &step : select.steps) {
        if (contains_aggregate(*step.right)) {
            return true;
        }
    }
    for (const auto &row : select.values) {
        if (in_list(row)) {
            return true;
        }
    }
    if (select.with != nullptr) {
        for (const ast::CommonTableExpr &cte : select.with->ctes) {
            if (cte.query != nullptr && contains_aggregate(*cte.query)) {
                return true;
            }
        }
    }
    for (const ast::ResTarget &target : select.targets) {
        if (in(target.value)) {
            return true;
        }
    }
    for (const ast::FromPtr &item : select.from) {
        if (in_from(*item, in_from)) {
            return true;
        }
    }
    for (const ast::SortBy &key : select.order_by) {
        if (in(key.value)) {
            return true;
        }
    }
    return in(select.where) || in_list(select.group_by) || in(select.having) || in(select.limit) ||
           in(select.offset);
}

Bound Binder::bind_aggregate(const ast::FuncCall &call, ast::Location location, Context &context) {
    const std::string &name = call.name;
    if (context.aggregates == nullptr) {
        fail("aggregate functions are not allowed in " + std::string(context.clause), location);
    }
    if (call.within_group || (!call.order.empty() && name != "string_agg" && name != "group_concat")) {
        fail("WITHIN GROUP and ORDER BY in aggregates are not supported (except string_agg(x ORDER BY x))",
             location);
    }
    // FILTER (WHERE c): the aggregate sees CASE WHEN c THEN argument END, which is NULL (and so
    // skipped) on the rows c does not accept; count(*) counts CASE WHEN c THEN 1 END.
    db::ExprPtr filter;
    if (call.filter != nullptr) {
        const ast::Expr &filter_node = *call.filter;
        Context inner = context;
        inner.aggregates = nullptr;
        inner.windows = nullptr;
        inner.after_aggregate = false;
        inner.clause = "FILTER";
        filter = null_as_boolean(bind_value(filter_node, inner));
        if (filter->type().id != db::TypeId::boolean) {
            fail("argument of FILTER must be type BOOLEAN, not type " + filter->type().to_string(),
                 filter_node.location);
        }
    }
    const auto filtered = [&](db::ExprPtr value) {
        return filter == nullptr ? value : db::expr::case_when({{filter, std::move(value)}});
    };
    const std::vector<ast::ExprPtr> &arguments = call.arguments;
    const bool star = call.star;
    const bool distinct = call.distinct;
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
                fail("the fraction of quantile_cont must be a numeric constant", arguments[1]->location);
            }
            fraction = db::evaluate_constant(*db::expr::cast(value, db::Type::float64())).f64;
            if (!(fraction >= 0.0 && fraction <= 1.0)) {
                fail("the fraction of quantile_cont must be between 0 and 1", arguments[1]->location);
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
                    fail("the separator of " + name + " must be a string constant", arguments[1]->location);
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
                const std::vector<ast::SortBy> &keys = call.order;
                if (keys.size() > 1) {
                    fail(name + "(... ORDER BY ...) supports one key, the value itself", location);
                }
                if (keys.size() == 1) {
                    const ast::SortBy &sort_by = keys[0];
                    Bound key = bind(*sort_by.value, inner);
                    if (key.interval.has_value() || !same_expression(*key.expr, *bound.expr)) {
                        fail(name + "(... ORDER BY ...) supports only the aggregated value as the key",
                             sort_by.value->location);
                    }
                    order = sort_by.direction == ast::SortDirection::descending ? -1 : 1;
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

Bound Binder::bind_window(const ast::FuncCall &call, ast::Location location, Context &context) {
    const std::string &name = call.name;
    if (context.windows == nullptr) {
        fail("window functions are not allowed in " + std::string(context.clause), location);
    }
    const ast::WindowSpec &over = *call.over;
    if (!over.name.empty() || !over.refname.empty()) {
        fail("named windows (WINDOW w AS ...) are not supported", location);
    }
    if (call.distinct) {
        fail("DISTINCT is not supported in window functions", location);
    }
    if (call.filter != nullptr || !call.order.empty() || call.within_group) {
        fail("FILTER and ORDER BY are not supported in window functions", location);
    }
    // Keys and arguments see the block like the select list does (group keys and aggregates in
    // an aggregate query); window functions inside them are an error.
    Context inner = context;
    inner.windows = nullptr;
    inner.clause = "the arguments of a window function";
    BoundWindow window;
    for (const ast::ExprPtr &key : over.partition) {
        window.partition.push_back(bind_value(*key, inner));
    }
    for (const ast::SortBy &sort : over.order) {
        window.order.push_back(bind_value(*sort.value, inner));
        LogicalSortKey key;
        key.descending = sort.direction == ast::SortDirection::descending;
        if (sort.nulls == ast::NullsOrder::first) {
            key.nulls_first = true;
        } else if (sort.nulls == ast::NullsOrder::last) {
            key.nulls_first = false;
        }
        window.order_keys.push_back(key);
    }
    // Frame (PostgreSQL's FRAMEOPTION_* bits).
    const std::int64_t options = over.frame_options;
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
        auto offset_of = [&](const ast::ExprPtr &offset) -> std::uint64_t {
            Context constant;
            constant.clause = "a window frame offset";
            if (offset == nullptr) {
                fail("window frame offsets must be integer constants", location);
            }
            const ast::Expr &node = *offset;
            db::ExprPtr value = bind_value(node, constant);
            if (value->kind() != db::ExprKind::constant || value->value().null ||
                (value->type().id != db::TypeId::integer && value->type().id != db::TypeId::bigint)) {
                fail("window frame offsets must be integer constants", node.location);
            }
            if (value->value().i64 < 0) {
                fail("window frame offsets must not be negative", node.location);
            }
            return static_cast<std::uint64_t>(value->value().i64);
        };
        using Kind = db::FrameBoundKind;
        if ((options & start_unbounded_preceding) != 0) {
            window.start = {Kind::unbounded_preceding, 0};
        } else if ((options & start_current) != 0) {
            window.start = {Kind::current_row, 0};
        } else if ((options & start_preceding) != 0) {
            window.start = {Kind::preceding, offset_of(over.start_offset)};
        } else if ((options & start_following) != 0) {
            window.start = {Kind::following, offset_of(over.start_offset)};
        } else if ((options & start_unbounded_following) != 0) {
            fail("frame start cannot be UNBOUNDED FOLLOWING", location);
        }
        if ((options & end_unbounded_following) != 0) {
            window.end = {Kind::unbounded_following, 0};
        } else if ((options & end_current) != 0) {
            window.end = {Kind::current_row, 0};
        } else if ((options & end_preceding) != 0) {
            window.end = {Kind::preceding, offset_of(over.end_offset)};
        } else if ((options & end_following) != 0) {
            window.end = {Kind::following, offset_of(over.end_offset)};
        } else if ((options & end_unbounded_preceding) != 0) {
            fail("frame end cannot be UNBOUNDED PRECEDING", location);
        }
    }

    const std::vector<ast::ExprPtr> &arguments = call.arguments;
    const bool star = call.star;
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
                fail(name + " supports only a constant integer offset", arguments[1]->location);
            }
            window.offset = offset->value().null ? 1 : offset->value().i64;
            if (offset->value().null) {
                fail(name + " offset must not be NULL", arguments[1]->location);
            }
        }
        if (arguments.size() == 3) {
            Bound fallback = bind(*arguments[2], inner);
            try {
                window.default_value = fallback.string_literal
                                           ? cast_literal(fallback, window.argument->type())
                                           : checked(db::expr::cast(fallback.expr, window.argument->type()),
                                                     arguments[2]->location);
            } catch (const db::TypeError &error) {
                fail(error.what(), arguments[2]->location);
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

Bound Binder::bind_function(const ast::FuncCall &call, ast::Location location, Context &context) {
    const std::string &name = call.name;
    if (call.over != nullptr) {
        return bind_window(call, location, context);
    }
    if (is_aggregate_name(name)) {
        return bind_aggregate(call, location, context);
    }
    if (call.star || call.distinct) {
        fail("function " + name + " is not an aggregate", location);
    }
    const std::vector<ast::ExprPtr> &arguments = call.arguments;
    Bound result;
    result.location = location;
    if (name == "extract" || name == "date_part") {
        const auto *field_name = arguments.size() == 2 ? arguments[0]->as<ast::Constant>() : nullptr;
        if (field_name == nullptr || field_name->kind != ast::Constant::Kind::string) {
            fail("EXTRACT needs a field name and a date", location);
        }
        const std::string part = lower(field_name->text);
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
        for (const ast::ExprPtr &argument : arguments) {
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
        for (const ast::ExprPtr &argument : arguments) {
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
                fail("interval values are supported only in date arithmetic", arguments[i]->location);
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
        return bind_nullif(*arguments[0], *arguments[1], location, context);
    }
    fail("function " + name + "() is not supported", location);
}

LogicalPtr Binder::plan_windows(LogicalPtr tree, std::vector<BoundWindow> &windows) {
    // Every key and argument that is not a plain column becomes a column of a projection below.
    std::vector<db::ExprPtr> expressions;
    std::vector<ColumnId> ids;
    for (const ColumnId id : tree->output) {
        expressions.push_back(_columns.ref(id));
        ids.push_back(id);
    }
    auto column_of = [&](const db::ExprPtr &expression) -> ColumnId {
        if (expression->kind() == db::ExprKind::column) {
            return static_cast<ColumnId>(expression->column_index());
        }
        for (std::size_t i = tree->output.size(); i < expressions.size(); ++i) {
            if (same_expression(*expressions[i], *expression)) {
                return ids[i];
            }
        }
        const bool nullable = expression->kind() != db::ExprKind::constant || expression->value().null;
        expressions.push_back(expression);
        ids.push_back(_columns.add(db::to_string(*expression), expression->type(), nullable));
        return ids.back();
    };
    struct Group {
        std::vector<ColumnId> partition;
        std::vector<LogicalSortKey> order;
        std::vector<LogicalWindowFunction> functions;
    };
    std::vector<Group> groups;
    for (const BoundWindow &window : windows) {
        Group group;
        for (const auto &key : window.partition) {
            group.partition.push_back(column_of(key));
        }
        for (std::size_t k = 0; k < window.order.size(); ++k) {
            LogicalSortKey key = window.order_keys[k];
            key.column = column_of(window.order[k]);
            group.order.push_back(key);
        }
        LogicalWindowFunction function;
        function.function = window.function;
        if (window.argument != nullptr) {
            function.argument = column_of(window.argument);
        }
        if (window.default_value != nullptr) {
            function.default_value = column_of(window.default_value);
        }
        function.offset = window.offset;
        function.rows = window.rows;
        function.start = window.start;
        function.end = window.end;
        function.output = window.output;
        auto same_keys = [&](const Group &other) {
            if (other.partition != group.partition || other.order.size() != group.order.size()) {
                return false;
            }
            for (std::size_t k = 0; k < group.order.size(); ++k) {
                const auto &a = other.order[k];
                const auto &b = group.order[k];
                if (a.column != b.column || a.descending != b.descending || a.nulls_first != b.nulls_first) {
                    return false;
                }
            }
            return true;
        };
        const auto found = std::find_if(groups.begin(), groups.end(), same_keys);
        if (found != groups.end()) {
            found->functions.push_back(function);
        } else {
            group.functions.push_back(function);
            groups.push_back(std::move(group));
        }
    }
    if (expressions.size() > tree->output.size()) {
        tree = make_project(std::move(tree), std::move(expressions), std::move(ids));
    }
    for (Group &group : groups) {
        tree = make_window(std::move(tree), std::move(group.partition), std::move(group.order),
                           std::move(group.functions));
    }
    return tree;
}

} // namespace mx::sql::detail
