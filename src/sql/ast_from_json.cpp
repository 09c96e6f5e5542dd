#include "ast_from_json.h"

#include <utility>

namespace mx::sql::detail {

namespace {

using ast::ExprPtr;
using ast::SelectPtr;

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

std::vector<std::string> strings(const Json &body, std::string_view key) {
    std::vector<std::string> out;
    for (const Json *item : list_field(body, key)) {
        out.push_back(string_value(*item));
    }
    return out;
}

/// The name of a FuncCall without the pg_catalog qualifier, lower case.
std::string function_name(const Json &body) {
    const auto names = list_field(body, "funcname");
    return names.empty() ? std::string() : lower(string_value(*names.back()));
}

/// The select body of a query node (set operation branches come without the wrapper).
const Json &select_body(const Json &node) { return node_name(node) == "SelectStmt" ? node_body(node) : node; }

bool is_set_operation(const Json &select) {
    const std::string op = string_field(select, "op");
    return !op.empty() && op != "SETOP_NONE";
}

/// Clauses that apply to the result of a set operation or VALUES list as a whole.
bool has_result_clauses(const Json &select) {
    return field(select, "sortClause").is_array() || !field(select, "limitCount").is_null() ||
           !field(select, "limitOffset").is_null() || field(select, "withClause").is_object();
}

class Converter {
public:
    ast::Statement statement(const Json &node);

private:
    ExprPtr expression(const Json &node);
    ExprPtr optional_expression(const Json &node) { return node.is_null() ? nullptr : expression(node); }
    std::vector<ExprPtr> expressions(const std::vector<const Json *> &nodes);
    void a_expr(const Json &body, ast::Expr &out);
    ast::FuncCall function_call(const Json &body);
    std::vector<ast::SortBy> sort_list(const std::vector<const Json *> &nodes);
    ast::TypeName type_name(const Json &body);

    SelectPtr query(const Json &node);
    SelectPtr select(const Json &body, bool inner_of_wrapper);
    void select_clauses(const Json &body, ast::SelectStmt &out);
    void result_clauses(const Json &body, ast::SelectStmt &out);
    ast::FromPtr from_item(const Json &node);
    static ast::RangeVar range_var(const Json &body);
    static std::optional<ast::Alias> alias(const Json &node);

    ast::CreateTable create_table(const Json &body);
    ast::Copy copy(const Json &body);
    ast::Insert insert(const Json &body);
    ast::Explain explain(const Json &body);

    int _expression_depth{0};
    int _query_depth{0};
};

/// Counts one level of nesting for as long as it lives.
class Nesting {
public:
    explicit Nesting(int &depth) noexcept : _depth(depth) { ++_depth; }
    ~Nesting() { --_depth; }
    Nesting(const Nesting &) = delete;
    Nesting &operator=(const Nesting &) = delete;

private:
    int &_depth;
};

template <class T>
ExprPtr make(T node, ast::Location location) {
    auto out = std::make_unique<ast::Expr>();
    out->node = std::move(node);
    out->location = location;
    return out;
}

ExprPtr unsupported(std::string message, ast::Location location, std::vector<ExprPtr> children = {}) {
    return make(ast::Unsupported{std::move(message), std::move(children)}, location);
}

std::vector<ExprPtr> Converter::expressions(const std::vector<const Json *> &nodes) {
    std::vector<ExprPtr> out;
    out.reserve(nodes.size());
    for (const Json *node : nodes) {
        out.push_back(expression(*node));
    }
    return out;
}

std::vector<ast::SortBy> Converter::sort_list(const std::vector<const Json *> &nodes) {
    std::vector<ast::SortBy> out;
    for (const Json *node : nodes) {
        const Json &body = node_body(*node);
        ast::SortBy key;
        key.value = expression(field(body, "node"));
        const std::string direction = string_field(body, "sortby_dir");
        key.direction = direction == "SORTBY_DESC"  ? ast::SortDirection::descending
                        : direction == "SORTBY_ASC" ? ast::SortDirection::ascending
                                                    : ast::SortDirection::default_order;
        const std::string nulls = string_field(body, "sortby_nulls");
        key.nulls = nulls == "SORTBY_NULLS_FIRST"  ? ast::NullsOrder::first
                    : nulls == "SORTBY_NULLS_LAST" ? ast::NullsOrder::last
                                                   : ast::NullsOrder::default_order;
        key.using_operator = !string_field(body, "useOp").empty() || field(body, "useOp").is_array();
        out.push_back(std::move(key));
    }
    return out;
}

ast::TypeName Converter::type_name(const Json &body) {
    ast::TypeName out;
    out.names = strings(body, "names");
    out.modifiers = expressions(list_field(body, "typmods"));
    out.array = field(body, "arrayBounds").is_array();
    out.location = int_field(body, "location", -1);
    return out;
}

ast::FuncCall Converter::function_call(const Json &body) {
    ast::FuncCall out;
    out.name = function_name(body);
    out.arguments = expressions(list_field(body, "args"));
    out.star = bool_field(body, "agg_star");
    out.distinct = bool_field(body, "agg_distinct");
    out.within_group = bool_field(body, "agg_within_group");
    out.order = sort_list(list_field(body, "agg_order"));
    out.filter = optional_expression(field(body, "agg_filter"));
    if (const Json &over = field(body, "over"); over.is_object()) {
        out.over = std::make_unique<ast::WindowSpec>();
        out.over->name = string_field(over, "name");
        out.over->refname = string_field(over, "refname");
        out.over->partition = expressions(list_field(over, "partitionClause"));
        out.over->order = sort_list(list_field(over, "orderClause"));
        out.over->frame_options = int_field(over, "frameOptions", 0);
        out.over->start_offset = optional_expression(field(over, "startOffset"));
        out.over->end_offset = optional_expression(field(over, "endOffset"));
    }
    return out;
}

void Converter::a_expr(const Json &body, ast::Expr &out) {
    const std::string kind = string_field(body, "kind");
    const auto names = list_field(body, "name");
    const std::string op = names.empty() ? std::string() : string_value(*names.back());
    const Json &left = field(body, "lexpr");
    const Json &right = field(body, "rexpr");
    if (kind == "AEXPR_OP") {
        out.node = ast::Operator{op, optional_expression(left), optional_expression(right)};
    } else if (kind == "AEXPR_IN") {
        out.node = ast::InList{optional_expression(left), expressions(list_items(right)), op == "<>"};
    } else if (kind == "AEXPR_LIKE" || kind == "AEXPR_ILIKE") {
        ast::Like like;
        like.operand = optional_expression(left);
        like.insensitive = kind == "AEXPR_ILIKE";
        like.negated = op == "!~~" || op == "!~~*";
        if (node_name(right) == "FuncCall" && function_name(node_body(right)) == "like_escape") {
            const auto arguments = list_field(node_body(right), "args");
            if (arguments.size() == 2) {
                like.pattern = expression(*arguments[0]);
                like.escape = expression(*arguments[1]);
            } else {
                like.invalid_escape = true;
            }
        } else {
            like.pattern = optional_expression(right);
        }
        out.node = std::move(like);
    } else if (kind == "AEXPR_BETWEEN" || kind == "AEXPR_NOT_BETWEEN") {
        out.node = ast::Between{optional_expression(left), expressions(list_items(right)),
                                kind == "AEXPR_NOT_BETWEEN"};
    } else if (kind == "AEXPR_DISTINCT" || kind == "AEXPR_NOT_DISTINCT") {
        out.node = ast::DistinctFrom{optional_expression(left), optional_expression(right),
                                     kind == "AEXPR_NOT_DISTINCT"};
    } else if (kind == "AEXPR_NULLIF") {
        out.node = ast::NullIf{optional_expression(left), optional_expression(right)};
    } else {
        std::string message = "unsupported operator expression " + kind;
        if (kind == "AEXPR_SIMILAR") {
            message = "SIMILAR TO is not supported";
        } else if (kind == "AEXPR_OP_ANY" || kind == "AEXPR_OP_ALL") {
            message = "ANY/ALL with arrays are not supported";
        } else if (kind == "AEXPR_BETWEEN_SYM" || kind == "AEXPR_NOT_BETWEEN_SYM") {
            message = "BETWEEN SYMMETRIC is not supported";
        }
        std::vector<ExprPtr> children;
        if (ExprPtr l = optional_expression(left)) {
            children.push_back(std::move(l));
        }
        for (const Json *item : list_items(right)) {
            children.push_back(expression(*item));
        }
        if (!right.is_array() && node_name(right) != "List" && !right.is_null()) {
            children.push_back(expression(right));
        }
        out.node = ast::Unsupported{std::move(message), std::move(children)};
    }
}

ExprPtr Converter::expression(const Json &node) {
    const Nesting nesting(_expression_depth);
    const std::string_view kind = node_name(node);
    const Json &body = node_body(node);
    if (_expression_depth > ast::max_expression_depth) {
        return unsupported("expression nested too deeply (more than 256 levels)", location_of(node));
    }
    auto out = std::make_unique<ast::Expr>();
    out->location = int_field(body, "location", -1);
    if (kind == "ColumnRef") {
        ast::ColumnRef ref;
        const auto fields = list_field(body, "fields");
        for (std::size_t i = 0; i < fields.size(); ++i) {
            if (node_name(*fields[i]) == "A_Star") {
                (i + 1 == fields.size() ? ref.star : ref.inner_star) = true;
            } else {
                ref.names.push_back(string_value(*fields[i]));
            }
        }
        out->node = std::move(ref);
    } else if (kind == "A_Const") {
        ast::Constant constant;
        using Kind = ast::Constant::Kind;
        if (bool_field(body, "isnull")) {
            constant.kind = Kind::null;
        } else if (const Json &ival = field(body, "ival"); ival.is_object()) {
            constant.kind = Kind::integer;
            constant.integer = int_field(ival, "ival");
        } else if (const Json &sval = field(body, "sval"); sval.is_object()) {
            constant.kind = Kind::string;
            constant.text = string_field(sval, "sval");
        } else if (const Json &boolval = field(body, "boolval"); boolval.is_object()) {
            constant.kind = Kind::boolean;
            constant.boolean = bool_field(boolval, "boolval");
        } else if (const Json &fval = field(body, "fval"); fval.is_object()) {
            constant.kind = Kind::number;
            constant.text = string_field(fval, "fval");
        } else if (field(body, "bsval").is_object()) {
            constant.kind = Kind::bit_string;
        } else {
            constant.kind = Kind::unknown;
        }
        out->node = std::move(constant);
    } else if (kind == "A_Expr") {
        a_expr(body, *out);
    } else if (kind == "BoolExpr") {
        const std::string op = string_field(body, "boolop");
        out->node = ast::BoolExpr{op == "AND_EXPR"  ? ast::BoolOperator::and_op
                                  : op == "OR_EXPR" ? ast::BoolOperator::or_op
                                                    : ast::BoolOperator::not_op,
                                  expressions(list_field(body, "args"))};
    } else if (kind == "NullTest") {
        out->node = ast::NullTest{optional_expression(field(body, "arg")),
                                  string_field(body, "nulltesttype") == "IS_NOT_NULL"};
    } else if (kind == "CaseExpr") {
        ast::CaseExpr expression_case;
        expression_case.operand = optional_expression(field(body, "arg"));
        for (const Json *when : list_field(body, "args")) {
            const Json &branch = node_body(*when);
            expression_case.branches.push_back(ast::CaseWhen{optional_expression(field(branch, "expr")),
                                                             optional_expression(field(branch, "result")),
                                                             location_of(*when)});
        }
        expression_case.otherwise = optional_expression(field(body, "defresult"));
        out->node = std::move(expression_case);
    } else if (kind == "CoalesceExpr") {
        out->node = ast::Coalesce{expressions(list_field(body, "args"))};
    } else if (kind == "MinMaxExpr") {
        out->node =
            ast::MinMax{string_field(body, "op") == "IS_GREATEST", expressions(list_field(body, "args"))};
    } else if (kind == "TypeCast") {
        out->node =
            ast::TypeCast{optional_expression(field(body, "arg")), type_name(field(body, "typeName"))};
    } else if (kind == "FuncCall") {
        out->node = function_call(body);
    } else if (kind == "SubLink") {
        ast::SubLink link;
        const std::string type = string_field(body, "subLinkType");
        link.kind = type == "EXISTS_SUBLINK" ? ast::SubLinkKind::exists
                    : type == "ANY_SUBLINK"  ? ast::SubLinkKind::any
                    : type == "ALL_SUBLINK"  ? ast::SubLinkKind::all
                    : type == "EXPR_SUBLINK" ? ast::SubLinkKind::expression
                                             : ast::SubLinkKind::other;
        link.kind_name = type;
        link.test = optional_expression(field(body, "testexpr"));
        link.operators = strings(body, "operName");
        if (link.kind != ast::SubLinkKind::other) {
            link.query = query(field(body, "subselect"));
        }
        out->node = std::move(link);
    } else if (kind == "RowExpr") {
        out->node = ast::Row{expressions(list_field(body, "args"))};
    } else if (kind == "SQLValueFunction" && string_field(body, "op") == "SVFOP_CURRENT_DATE") {
        out->node = ast::CurrentDate{};
    } else if (kind == "SetToDefault") {
        out->node = ast::SetToDefault{};
        out->location = location_of(node);
    } else if (kind == "GroupingSet") {
        out->node = ast::GroupingSet{};
        out->location = location_of(node);
    } else {
        std::string message = "unsupported expression: " + std::string(kind.empty() ? "?" : kind);
        std::vector<ExprPtr> children;
        if (kind == "ParamRef") {
            message = "parameters ($n) are not supported";
        } else if (kind == "SQLValueFunction") {
            message =
                "CURRENT_TIME, CURRENT_TIMESTAMP and similar functions are not supported (CURRENT_DATE is)";
        } else if (kind == "BooleanTest") {
            message = "IS [NOT] TRUE/FALSE/UNKNOWN is not supported";
            if (ExprPtr argument = optional_expression(field(body, "arg"))) {
                children.push_back(std::move(argument));
            }
        } else if (kind == "A_Indirection" || kind == "A_ArrayExpr") {
            message = "arrays and rows are not supported";
            if (ExprPtr argument = optional_expression(field(body, "arg"))) {
                children.push_back(std::move(argument));
            }
            for (ExprPtr &element : expressions(list_field(body, "elements"))) {
                children.push_back(std::move(element));
            }
        } else if (kind == "CollateClause") {
            message = "COLLATE is not supported";
            if (ExprPtr argument = optional_expression(field(body, "arg"))) {
                children.push_back(std::move(argument));
            }
        }
        out->location = location_of(node);
        out->node = ast::Unsupported{std::move(message), std::move(children)};
    }
    return out;
}

std::optional<ast::Alias> Converter::alias(const Json &node) {
    if (!node.is_object()) {
        return std::nullopt;
    }
    return ast::Alias{string_field(node, "aliasname"), strings(node, "colnames")};
}

ast::RangeVar Converter::range_var(const Json &body) {
    return ast::RangeVar{string_field(body, "catalogname"), string_field(body, "schemaname"),
                         string_field(body, "relname"), alias(field(body, "alias"))};
}

ast::FromPtr Converter::from_item(const Json &node) {
    const std::string_view kind = node_name(node);
    const Json &body = node_body(node);
    auto out = std::make_unique<ast::FromItem>();
    if (kind == "RangeVar") {
        out->node = range_var(body);
        out->location = int_field(body, "location", -1);
    } else if (kind == "RangeSubselect") {
        const Json &subquery = field(body, "subquery");
        out->node =
            ast::RangeSubselect{query(subquery), alias(field(body, "alias")), bool_field(body, "lateral")};
        out->location = location_of(subquery);
    } else if (kind == "JoinExpr") {
        ast::JoinExpr join;
        join.type_name = string_field(body, "jointype");
        join.type = join.type_name == "JOIN_INNER"   ? ast::JoinType::inner
                    : join.type_name == "JOIN_LEFT"  ? ast::JoinType::left
                    : join.type_name == "JOIN_RIGHT" ? ast::JoinType::right
                    : join.type_name == "JOIN_FULL"  ? ast::JoinType::full
                                                     : ast::JoinType::other;
        join.natural = bool_field(body, "isNatural");
        join.has_alias = field(body, "alias").is_object() || field(body, "join_using_alias").is_object();
        join.left = from_item(field(body, "larg"));
        join.right = from_item(field(body, "rarg"));
        join.using_columns = strings(body, "usingClause");
        join.condition = optional_expression(field(body, "quals"));
        out->location = location_of(field(body, "larg"));
        out->node = std::move(join);
    } else {
        out->node =
            ast::UnsupportedFrom{kind == "RangeFunction" ? std::string("table functions are not supported")
                                                         : "unsupported FROM item: " + std::string(kind)};
        out->location = location_of(node);
    }
    return out;
}

SelectPtr Converter::query(const Json &node) {
    if (node_name(node) != "SelectStmt") {
        return nullptr;
    }
    return select(node_body(node), false);
}

void Converter::result_clauses(const Json &body, ast::SelectStmt &out) {
    out.order_by = sort_list(list_field(body, "sortClause"));
    out.limit = optional_expression(field(body, "limitCount"));
    out.offset = optional_expression(field(body, "limitOffset"));
    out.with_ties = string_field(body, "limitOption") == "LIMIT_OPTION_WITH_TIES";
    if (const Json &with = field(body, "withClause"); with.is_object()) {
        out.with = std::make_unique<ast::WithClause>();
        out.with->recursive = bool_field(with, "recursive");
        out.with->location = int_field(with, "location", -1);
        for (const Json *cte : list_field(with, "ctes")) {
            const Json &definition = node_body(*cte);
            out.with->ctes.push_back(ast::CommonTableExpr{
                string_field(definition, "ctename"), strings(definition, "aliascolnames"),
                query(field(definition, "ctequery")), int_field(definition, "location", -1)});
        }
    }
}

void Converter::select_clauses(const Json &body, ast::SelectStmt &out) {
    const Json &distinct = field(body, "distinctClause");
    out.distinct = distinct.is_array();
    out.distinct_on = out.distinct && !distinct.empty() && !distinct.front().empty();
    for (const Json *target : list_field(body, "targetList")) {
        const Json &target_body = node_body(*target);
        out.targets.push_back(ast::ResTarget{string_field(target_body, "name"),
                                             optional_expression(field(target_body, "val")),
                                             int_field(target_body, "location", -1)});
    }
    for (const Json *item : list_field(body, "fromClause")) {
        out.from.push_back(from_item(*item));
    }
    out.where = optional_expression(field(body, "whereClause"));
    out.group_by = expressions(list_field(body, "groupClause"));
    out.having = optional_expression(field(body, "havingClause"));
    result_clauses(body, out);
}

SelectPtr Converter::select(const Json &body, bool inner_of_wrapper) {
    const Nesting nesting(_query_depth);
    auto out = std::make_unique<ast::SelectStmt>();
    if (_query_depth > ast::max_query_depth + 1) {
        out->too_deep = true;
        return out;
    }
    // Expression depth counts per query block, as binding does.
    const int outer_expression_depth = std::exchange(_expression_depth, 0);
    static const std::pair<const char *, const char *> unsupported_clauses[] = {
        {"windowClause", "WINDOW clauses"},
        {"lockingClause", "FOR UPDATE/SHARE"},
        {"intoClause", "SELECT INTO"},
        {"groupDistinct", "GROUP BY DISTINCT"},
    };
    for (const auto &[key, what] : unsupported_clauses) {
        if (body.is_object() && body.contains(key) && out->unsupported_clause.empty()) {
            out->unsupported_clause = what;
        }
    }
    const bool set_operation = is_set_operation(body);
    const bool values = field(body, "valuesLists").is_array();
    if ((set_operation || values) && !inner_of_wrapper && has_result_clauses(body)) {
        // SELECT * FROM (<set operation or VALUES>) AS unnamed_subquery ORDER BY ... LIMIT ...:
        // ORDER BY names the result's columns, WITH is visible in every branch.
        out->unsupported_clause.clear();
        auto star = std::make_unique<ast::Expr>();
        star->node = ast::ColumnRef{{}, true, false};
        out->targets.push_back(ast::ResTarget{"", std::move(star), -1});
        auto from = std::make_unique<ast::FromItem>();
        from->node = ast::RangeSubselect{select(body, true), ast::Alias{"unnamed_subquery", {}}, false};
        out->from.push_back(std::move(from));
        result_clauses(body, *out);
    } else if (set_operation) {
        // The left spine, top first, converted in a loop (chains of thousands of UNIONs are
        // left-deep).
        out->kind = ast::SelectStmt::Kind::set_operation;
        std::vector<const Json *> spine;
        const Json *leftmost = &body;
        while (is_set_operation(*leftmost) && (leftmost == &body || !has_result_clauses(*leftmost))) {
            spine.push_back(leftmost);
            leftmost = &select_body(field(*leftmost, "larg"));
        }
        out->first = select(*leftmost, false);
        for (auto it = spine.rbegin(); it != spine.rend(); ++it) {
            const std::string op = string_field(**it, "op");
            ast::SetStep step;
            step.op = op == "SETOP_INTERSECT" ? ast::SetOperator::intersect
                      : op == "SETOP_EXCEPT"  ? ast::SetOperator::except
                                              : ast::SetOperator::union_op;
            step.all = bool_field(**it, "all");
            step.right = select(select_body(field(**it, "rarg")), false);
            out->steps.push_back(std::move(step));
        }
    } else if (values) {
        out->kind = ast::SelectStmt::Kind::values;
        for (const Json *list : list_field(body, "valuesLists")) {
            out->values.push_back(expressions(list_field(node_body(*list), "items")));
        }
    } else {
        select_clauses(body, *out);
    }
    _expression_depth = outer_expression_depth;
    return out;
}

ast::CreateTable Converter::create_table(const Json &body) {
    ast::CreateTable out;
    const Json &relation = field(body, "relation");
    out.table = range_var(relation);
    out.table_location = int_field(relation, "location", -1);
    out.inherits_or_partitioned = field(body, "inhRelations").is_array() ||
                                  field(body, "partspec").is_object() || field(body, "partbound").is_object();
    out.if_not_exists = bool_field(body, "if_not_exists");
    for (const Json *element : list_field(body, "tableElts")) {
        const std::string_view kind = node_name(*element);
        const Json &definition = node_body(*element);
        if (kind == "Constraint") {
            const std::string type = string_field(definition, "contype");
            ast::TableConstraint constraint;
            constraint.kind = type == "CONSTR_PRIMARY"   ? ast::TableConstraint::Kind::primary_key
                              : type == "CONSTR_UNIQUE"  ? ast::TableConstraint::Kind::unique
                              : type == "CONSTR_FOREIGN" ? ast::TableConstraint::Kind::foreign_key
                                                         : ast::TableConstraint::Kind::other;
            constraint.keys = strings(definition, "keys");
            constraint.location = int_field(definition, "location", -1);
            out.elements.emplace_back(std::move(constraint));
        } else if (kind == "ColumnDef") {
            ast::ColumnDefinition column;
            column.name = string_field(definition, "colname");
            column.type = type_name(field(definition, "typeName"));
            column.location = int_field(definition, "location", -1);
            for (const Json *constraint : list_field(definition, "constraints")) {
                const Json &c = node_body(*constraint);
                const std::string type = string_field(c, "contype");
                using Kind = ast::ColumnDefinition::Constraint;
                const Kind constraint_kind = type == "CONSTR_NOTNULL"   ? Kind::not_null
                                             : type == "CONSTR_NULL"    ? Kind::null
                                             : type == "CONSTR_PRIMARY" ? Kind::primary_key
                                             : type == "CONSTR_UNIQUE"  ? Kind::unique
                                             : type == "CONSTR_FOREIGN" ? Kind::foreign_key
                                             : type == "CONSTR_DEFAULT" ? Kind::default_value
                                             : type == "CONSTR_CHECK"   ? Kind::check
                                                                        : Kind::other;
                column.constraints.push_back({constraint_kind, int_field(c, "location", column.location)});
            }
            column.collate = field(definition, "collClause").is_object();
            out.elements.emplace_back(std::move(column));
        } else {
            out.elements.emplace_back(ast::OtherTableElement{std::string(kind), location_of(*element)});
        }
    }
    return out;
}

ast::Copy Converter::copy(const Json &body) {
    ast::Copy out;
    if (const Json &relation = field(body, "relation"); relation.is_object()) {
        out.table = range_var(relation);
        out.table_location = int_field(relation, "location", -1);
    }
    out.from = bool_field(body, "is_from");
    out.has_columns = field(body, "attlist").is_array();
    out.has_where = field(body, "whereClause").is_object();
    out.file = string_field(body, "filename");
    for (const Json *option : list_field(body, "options")) {
        const Json &definition = node_body(*option);
        ast::CopyOption parsed;
        parsed.name = string_field(definition, "defname");
        parsed.location = int_field(definition, "location", -1);
        const Json &argument = field(definition, "arg");
        const std::string_view kind = node_name(argument);
        using Kind = ast::CopyOption::Kind;
        if (argument.is_null()) {
            parsed.kind = Kind::none;
        } else if (kind == "String") {
            parsed.kind = Kind::string;
            parsed.text = string_value(argument);
        } else if (kind == "Integer") {
            parsed.kind = Kind::integer;
            parsed.integer = int_field(node_body(argument), "ival");
        } else if (kind == "Boolean") {
            parsed.kind = Kind::boolean;
            parsed.boolean = bool_field(node_body(argument), "boolval");
        } else {
            parsed.kind = Kind::other;
        }
        out.options.push_back(std::move(parsed));
    }
    return out;
}

ast::Insert Converter::insert(const Json &body) {
    ast::Insert out;
    const Json &relation = field(body, "relation");
    out.table = range_var(relation);
    out.table_location = int_field(relation, "location", -1);
    out.unsupported_clauses = field(body, "onConflictClause").is_object() ||
                              field(body, "returningList").is_array() ||
                              field(body, "withClause").is_object();
    for (const Json *column : list_field(body, "cols")) {
        const Json &target = node_body(*column);
        out.columns.push_back(
            ast::InsertColumn{string_field(target, "name"), int_field(target, "location", -1)});
    }
    out.query = query(field(body, "selectStmt"));
    return out;
}

ast::Explain Converter::explain(const Json &body) {
    ast::Explain out;
    for (const Json *option : list_field(body, "options")) {
        out.options.push_back(
            ast::ExplainOption{string_field(node_body(*option), "defname"), location_of(*option)});
    }
    const Json &query_node = field(body, "query");
    out.statement = std::make_unique<ast::Statement>(statement(query_node));
    out.statement_location = location_of(query_node);
    return out;
}

ast::Statement Converter::statement(const Json &node) {
    const std::string_view kind = node_name(node);
    const Json &body = node_body(node);
    ast::Statement out;
    if (kind == "SelectStmt") {
        out.node = select(body, false);
    } else if (kind == "ExplainStmt") {
        out.node = explain(body);
    } else if (kind == "CreateStmt") {
        out.node = create_table(body);
    } else if (kind == "DropStmt") {
        ast::DropTable drop;
        drop.tables = string_field(body, "removeType") == "OBJECT_TABLE";
        drop.if_exists = bool_field(body, "missing_ok");
        for (const Json *object : list_field(body, "objects")) {
            drop.names.push_back(strings(node_body(*object), "items"));
        }
        out.node = std::move(drop);
    } else if (kind == "CopyStmt") {
        out.node = copy(body);
    } else if (kind == "InsertStmt") {
        out.node = insert(body);
    } else {
        out.node = ast::OtherStatement{std::string(kind)};
    }
    return out;
}

} // namespace

ast::Statement to_ast(const Statement &statement) {
    Converter converter;
    ast::Statement out = converter.statement(statement.node);
    out.location = statement.location;
    out.length = statement.length;
    return out;
}

} // namespace mx::sql::detail
