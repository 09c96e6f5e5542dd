#include <mx/sql/database.h>

#include <algorithm>
#include <cctype>
#include <new>
#include <sstream>

#include <mx/db/loader.h>

#include "binder.h"
#include "optimizer.h"
#include "parser.h"
#include "physical.h"

namespace mx::sql {

namespace {

using detail::Json;
using detail::lower;

/// A SELECT compiled down to its physical plan.
struct Compiled {
    detail::PhysicalPlan physical;
    std::vector<std::string> names;
    /// The optimizer's notes (the passes that ran and those that were off, what the optional
    /// ones did).
    std::vector<std::string> notes;
};

Compiled compile_select(const detail::Source &source, db::Catalog &catalog, const Json &select,
                        std::int64_t location, const OptimizerOptions &options) {
    detail::ColumnRegistry columns;
    detail::Binder binder(source, catalog, columns, location);
    detail::BoundQuery bound = binder.bind_select(select, nullptr);
    detail::Optimizer optimizer(columns, options);
    detail::LogicalPtr plan = optimizer.optimize(std::move(bound.plan));
    Compiled compiled;
    compiled.names = bound.names;
    compiled.notes = optimizer.notes();
    compiled.physical = detail::plan_physical(*plan, bound.names, columns);
    return compiled;
}

std::string explain_text(const Compiled &compiled, const db::ExecutionOptions &options) {
    // The scans' prefetch strategies are PlanNode fields: db::explain shows them.
    std::string text = db::explain(*compiled.physical.root, options);
    if (!compiled.notes.empty()) {
        text.append("Optimizer:\n");
        for (const auto &note : compiled.notes) {
            text.append("  ").append(note).append("\n");
        }
    }
    return text;
}

/// Runs one statement; `source` is the whole text (positions are relative to it).
class StatementRunner {
public:
    StatementRunner(Database &database, const detail::Source &source, const detail::Statement &statement)
        : _database(database), _source(source), _statement(statement) {}

    StatementResult run() {
        const std::string_view kind = detail::node_name(_statement.node);
        const Json &body = detail::node_body(_statement.node);
        if (kind == "SelectStmt") {
            return select(body);
        }
        if (kind == "ExplainStmt") {
            return explain(body);
        }
        if (kind == "CreateStmt") {
            return create_table(body);
        }
        if (kind == "DropStmt") {
            return drop(body);
        }
        if (kind == "CopyStmt") {
            return copy(body);
        }
        if (kind == "InsertStmt") {
            return insert(body);
        }
        if (kind == "TransactionStmt") {
            fail("transactions are not supported (every statement takes effect at once)", -1);
        }
        std::string name(kind);
        if (name.size() > 4 && name.compare(name.size() - 4, 4, "Stmt") == 0) {
            name.resize(name.size() - 4);
        }
        fail("statement not supported: " + name +
                 " (supported: SELECT, EXPLAIN, CREATE TABLE, DROP TABLE, INSERT, COPY ... FROM)",
             -1);
    }

    /// EXPLAIN ANALYZE of a SELECT: runs it as a SELECT would (cancellable, with progress),
    /// counting rows, tasks and time per operator; the rows are dropped.
    StatementResult explain_analyze(const Json &select) {
        Compiled compiled = compile_select(_source, _database.catalog(), select, _statement.location,
                                           _database.options().optimizer);
        StatementResult result;
        result.kind = StatementKind::explain;
        result.tag = "EXPLAIN";
        result.text = db::explain_analyze(run_plan(*compiled.physical.root, true, true));
        return result;
    }

private:
    [[noreturn]] void fail(const std::string &message, std::int64_t location) const {
        throw _source.error(message, location >= 0 ? location : _statement.location);
    }

    /// `rows`: the result as rows of Values whatever ExecutionOptions::columnar says (INSERT
    /// reads them).
    db::QueryResult run_plan(const db::PlanNode &plan, bool rows = false, bool analyze = false) {
        db::ExecutionOptions options = _database.options().execution;
        options.columnar = options.columnar && !rows;
        options.analyze = analyze;
        options.cancel = dataflow::CancelToken{};
        options.progress = db::QueryProgress{};
        const Database::RunningQuery running(_database, options);
        try {
            return db::execute(_database.runtime(), plan, options);
        } catch (const db::ExecutionError &error) {
            throw SqlError(error.what());
        }
    }

    StatementResult select(const Json &body) {
        Compiled compiled = compile_select(_source, _database.catalog(), body, _statement.location,
                                           _database.options().optimizer);
        StatementResult result;
        result.kind = StatementKind::query;
        result.rows = run_plan(*compiled.physical.root);
        result.tag = "SELECT " + std::to_string(result.rows.row_count());
        return result;
    }

    StatementResult explain(const Json &body) {
        bool analyze = false;
        for (const Json *option : detail::list_field(body, "options")) {
            const std::string name = detail::string_field(detail::node_body(*option), "defname");
            if (name == "analyze") {
                analyze = true;
            } else {
                fail("EXPLAIN option not supported: " + name + " (supported: ANALYZE)",
                     detail::location_of(*option));
            }
        }
        const Json &query = detail::field(body, "query");
        if (detail::node_name(query) != "SelectStmt") {
            fail("EXPLAIN supports SELECT statements only", detail::location_of(query));
        }
        if (analyze) {
            return explain_analyze(detail::node_body(query));
        }
        Compiled compiled = compile_select(_source, _database.catalog(), detail::node_body(query),
                                           _statement.location, _database.options().optimizer);
        StatementResult result;
        result.kind = StatementKind::explain;
        result.tag = "EXPLAIN";
        result.text = explain_text(compiled, _database.options().execution);
        return result;
    }

    StatementResult create_table(const Json &body) {
        const Json &relation = detail::field(body, "relation");
        const std::string name = detail::string_field(relation, "relname");
        const std::int64_t location = detail::int_field(relation, "location", -1);
        if (detail::field(body, "inhRelations").is_array() || detail::field(body, "partspec").is_object() ||
            detail::field(body, "partbound").is_object()) {
            fail("table inheritance and partitioning are not supported", location);
        }
        const std::string schema = detail::string_field(relation, "schemaname");
        if (!schema.empty() && lower(schema) != "main" && lower(schema) != "public") {
            fail("schemas are not supported: \"" + schema + "\"", location);
        }
        detail::ColumnRegistry registry;
        detail::Binder binder(_source, _database.catalog(), registry, _statement.location);
        std::vector<db::ColumnDef> columns;
        for (const Json *element : detail::list_field(body, "tableElts")) {
            const std::string_view kind = detail::node_name(*element);
            const Json &definition = detail::node_body(*element);
            if (kind == "Constraint") {
                // Table constraints: PRIMARY KEY, UNIQUE and FOREIGN KEY are accepted and not
                // enforced (the data is trusted, as in a loaded benchmark database).
                const std::string type = detail::string_field(definition, "contype");
                if (type != "CONSTR_PRIMARY" && type != "CONSTR_UNIQUE" && type != "CONSTR_FOREIGN") {
                    fail("table constraints other than PRIMARY KEY, UNIQUE and FOREIGN KEY are not supported",
                         detail::int_field(definition, "location", location));
                }
                continue;
            }
            if (kind != "ColumnDef") {
                fail("unsupported table element " + std::string(kind), detail::location_of(*element));
            }
            db::ColumnDef column;
            column.name = detail::string_field(definition, "colname");
            column.type = binder.bind_type(detail::field(definition, "typeName"));
            for (const Json *constraint : detail::list_field(definition, "constraints")) {
                const Json &c = detail::node_body(*constraint);
                const std::string type = detail::string_field(c, "contype");
                const std::int64_t at =
                    detail::int_field(c, "location", detail::int_field(definition, "location", -1));
                if (type == "CONSTR_NOTNULL") {
                    column.nullable = false;
                } else if (type == "CONSTR_NULL") {
                    column.nullable = true;
                } else if (type == "CONSTR_PRIMARY") {
                    // PostgreSQL: a primary key column is NOT NULL; uniqueness is not enforced.
                    column.nullable = false;
                } else if (type == "CONSTR_UNIQUE" || type == "CONSTR_FOREIGN") {
                    // accepted, not enforced
                } else if (type == "CONSTR_DEFAULT") {
                    fail("DEFAULT values are not supported", at);
                } else if (type == "CONSTR_CHECK") {
                    fail("CHECK constraints are not supported", at);
                } else {
                    fail("column constraint not supported", at);
                }
            }
            if (detail::field(definition, "collClause").is_object()) {
                fail("COLLATE is not supported", detail::int_field(definition, "location", -1));
            }
            columns.push_back(std::move(column));
        }
        // PRIMARY KEY (a, b) as a table constraint makes its columns NOT NULL too.
        for (const Json *element : detail::list_field(body, "tableElts")) {
            if (detail::node_name(*element) != "Constraint" ||
                detail::string_field(detail::node_body(*element), "contype") != "CONSTR_PRIMARY") {
                continue;
            }
            for (const Json *key : detail::list_field(detail::node_body(*element), "keys")) {
                const std::string key_name = lower(detail::string_value(*key));
                bool found = false;
                for (auto &column : columns) {
                    if (lower(column.name) == key_name) {
                        column.nullable = false;
                        found = true;
                    }
                }
                if (!found) {
                    fail("column \"" + detail::string_value(*key) + "\" named in key does not exist",
                         detail::location_of(*element));
                }
            }
        }
        if (_database.catalog().find(name) != nullptr) {
            if (detail::bool_field(body, "if_not_exists")) {
                StatementResult result;
                result.tag = "CREATE TABLE";
                return result;
            }
            fail("table \"" + name + "\" already exists", location);
        }
        db::Schema table_schema(std::move(columns));
        if (std::string problem = table_schema.validate(); !problem.empty()) {
            fail(problem, location);
        }
        try {
            _database.catalog().create_table(name, std::move(table_schema), _database.options().tables);
        } catch (const db::CatalogError &error) {
            fail(error.what(), location);
        }
        StatementResult result;
        result.tag = "CREATE TABLE";
        return result;
    }

    StatementResult drop(const Json &body) {
        if (detail::string_field(body, "removeType") != "OBJECT_TABLE") {
            fail("only DROP TABLE is supported", -1);
        }
        const bool if_exists = detail::bool_field(body, "missing_ok");
        // Check every name first, so that a missing one drops nothing.
        std::vector<std::string> names;
        for (const Json *object : detail::list_field(body, "objects")) {
            const auto parts = detail::list_field(detail::node_body(*object), "items");
            if (parts.empty()) {
                fail("invalid table name in DROP TABLE", -1);
            }
            if (parts.size() > 1) {
                const std::string schema = lower(detail::string_value(*parts[0]));
                if (parts.size() > 2 || (schema != "main" && schema != "public")) {
                    fail("schemas are not supported", -1);
                }
            }
            const std::string name = detail::string_value(*parts.back());
            if (!if_exists && _database.catalog().find(name) == nullptr) {
                fail("table \"" + name + "\" does not exist", -1);
            }
            names.push_back(name);
        }
        for (const auto &name : names) {
            try {
                _database.catalog().drop_table(name, if_exists);
            } catch (const db::CatalogError &error) {
                fail(error.what(), -1);
            }
        }
        StatementResult result;
        result.tag = "DROP TABLE";
        return result;
    }

    StatementResult copy(const Json &body) {
        const Json &relation = detail::field(body, "relation");
        if (!relation.is_object()) {
            fail("COPY (query) TO is not supported; use COPY table FROM 'file'", -1);
        }
        const std::string name = detail::string_field(relation, "relname");
        const std::int64_t location = detail::int_field(relation, "location", -1);
        if (!detail::bool_field(body, "is_from")) {
            fail("COPY ... TO is not supported (only COPY table FROM 'file')", -1);
        }
        if (detail::field(body, "attlist").is_array()) {
            fail("COPY with a column list is not supported", location);
        }
        if (detail::field(body, "whereClause").is_object()) {
            fail("COPY ... WHERE is not supported", location);
        }
        const std::string file = detail::string_field(body, "filename");
        if (file.empty()) {
            fail("COPY FROM STDIN and PROGRAM are not supported; name a file", -1);
        }
        if (_database.catalog().find(name) == nullptr) {
            fail("table \"" + name + "\" does not exist", location);
        }
        db::CsvOptions options;
        options.progress =
            _database.options().copy_progress ? db::ProgressMode::automatic : db::ProgressMode::never;
        bool quote_given = false;
        std::optional<bool> csv;
        for (const Json *option : detail::list_field(body, "options")) {
            const Json &definition = detail::node_body(*option);
            const std::string option_name = lower(detail::string_field(definition, "defname"));
            const std::int64_t at = detail::int_field(definition, "location", -1);
            const Json &argument = detail::field(definition, "arg");
            const std::string_view argument_kind = detail::node_name(argument);
            auto text = [&]() -> std::string {
                if (argument_kind == "String") {
                    return detail::string_value(argument);
                }
                if (argument_kind == "Integer") {
                    return std::to_string(detail::int_field(detail::node_body(argument), "ival"));
                }
                fail("option \"" + option_name + "\" needs a value", at);
            };
            auto flag = [&]() -> bool {
                if (argument.is_null()) {
                    return true;
                }
                if (argument_kind == "Boolean") {
                    return detail::bool_field(detail::node_body(argument), "boolval");
                }
                if (argument_kind == "Integer") {
                    const std::int64_t value = detail::int_field(detail::node_body(argument), "ival");
                    if (value == 0 || value == 1) {
                        return value == 1;
                    }
                }
                const std::string value =
                    argument_kind == "String" ? lower(detail::string_value(argument)) : "";
                if (value == "true" || value == "on") {
                    return true;
                }
                if (value == "false" || value == "off") {
                    return false;
                }
                fail("option \"" + option_name + "\" needs a Boolean value", at);
            };
            auto single_character = [&]() -> char {
                std::string value = text();
                if (value == "\\t") {
                    value = "\t";
                }
                if (value.size() != 1) {
                    fail("COPY " + option_name + " must be a single one-byte character", at);
                }
                return value[0];
            };
            if (option_name == "delimiter" || option_name == "delim" || option_name == "sep") {
                options.delimiter = single_character();
            } else if (option_name == "header") {
                options.header = flag();
            } else if (option_name == "null") {
                options.null_string = text();
            } else if (option_name == "quote") {
                options.quote = single_character();
                quote_given = true;
            } else if (option_name == "format") {
                const std::string format = lower(text());
                if (format != "csv" && format != "text") {
                    fail("COPY format \"" + format + "\" is not supported (csv and text are)", at);
                }
                csv = format == "csv";
            } else if (option_name == "escape") {
                const char escape = single_character();
                if (escape != options.quote.value_or('"')) {
                    fail("COPY ESCAPE other than the quote character is not supported", at);
                }
            } else {
                fail("COPY option \"" + option_name +
                         "\" is not supported (DELIMITER, HEADER, NULL, QUOTE, FORMAT, ESCAPE are)",
                     at);
            }
        }
        if (csv.has_value() && !*csv && !quote_given) {
            options.quote.reset(); // FORMAT text has no quoting
        }
        const db::LoadResult loaded = db::load(_database.runtime(), _database.catalog(), name, file, options);
        if (!loaded.ok()) {
            fail(loaded.error, -1);
        }
        StatementResult result;
        result.tag = "COPY " + std::to_string(loaded.rows);
        return result;
    }

    StatementResult insert(const Json &body) {
        const Json &relation = detail::field(body, "relation");
        const std::string name = detail::string_field(relation, "relname");
        const std::int64_t location = detail::int_field(relation, "location", -1);
        if (detail::field(body, "onConflictClause").is_object() ||
            detail::field(body, "returningList").is_array() ||
            detail::field(body, "withClause").is_object()) {
            fail("INSERT with ON CONFLICT, RETURNING or WITH is not supported", location);
        }
        auto base = _database.catalog().find(name);
        if (base == nullptr) {
            fail("table \"" + name + "\" does not exist", location);
        }
        const db::Schema &schema = base->schema();
        // Target columns: the list given, or all in order.
        std::vector<std::size_t> targets;
        for (const Json *column : detail::list_field(body, "cols")) {
            const Json &target = detail::node_body(*column);
            const std::string column_name = detail::string_field(target, "name");
            const auto index = schema.find(column_name);
            if (!index.has_value()) {
                fail("column \"" + column_name + "\" of table \"" + name + "\" does not exist",
                     detail::int_field(target, "location", -1));
            }
            if (std::find(targets.begin(), targets.end(), *index) != targets.end()) {
                fail("column \"" + column_name + "\" specified more than once",
                     detail::int_field(target, "location", -1));
            }
            targets.push_back(*index);
        }
        if (targets.empty()) {
            for (std::size_t i = 0; i < schema.size(); ++i) {
                targets.push_back(i);
            }
        }
        const Json &select = detail::node_body(detail::field(body, "selectStmt"));
        std::vector<std::vector<db::Value>> rows;
        std::vector<std::int64_t> row_locations;
        if (detail::field(select, "valuesLists").is_array()) {
            detail::ColumnRegistry registry;
            detail::Binder binder(_source, _database.catalog(), registry, _statement.location);
            for (const Json *list : detail::list_field(select, "valuesLists")) {
                const auto items = detail::list_field(detail::node_body(*list), "items");
                const std::int64_t row_location =
                    items.empty() ? location : detail::location_of(*items.front());
                if (items.size() != targets.size()) {
                    fail(items.size() > targets.size() ? "INSERT has more expressions than target columns"
                                                       : "INSERT has more target columns than expressions",
                         row_location);
                }
                std::vector<db::Value> row;
                for (const Json *item : items) {
                    if (detail::node_name(*item) == "SetToDefault") {
                        fail("DEFAULT is not supported", detail::location_of(*item));
                    }
                    db::ExprPtr value = binder.bind_constant(*item);
                    if (value->kind() != db::ExprKind::constant) {
                        fail("INSERT values must be constants", detail::location_of(*item));
                    }
                    row.push_back(value->value());
                }
                rows.push_back(std::move(row));
                row_locations.push_back(row_location);
            }
        } else {
            // INSERT INTO t SELECT ...: run the query, append its rows.
            Compiled compiled = compile_select(_source, _database.catalog(), select, _statement.location,
                                               _database.options().optimizer);
            if (compiled.physical.root->output.size() != targets.size()) {
                fail("INSERT has " + std::to_string(targets.size()) +
                         " target columns but the query returns " +
                         std::to_string(compiled.physical.root->output.size()),
                     location);
            }
            db::QueryResult queried = run_plan(*compiled.physical.root, true);
            rows = std::move(queried.rows);
            row_locations.assign(rows.size(), location);
        }
        db::TableBuilder builder(base);
        std::vector<db::Value> full(schema.size());
        for (std::size_t r = 0; r < rows.size(); ++r) {
            for (std::size_t c = 0; c < schema.size(); ++c) {
                full[c] = db::Value::null_of(schema[c].type);
            }
            for (std::size_t i = 0; i < targets.size(); ++i) {
                full[targets[i]] = rows[r][i];
            }
            const std::string problem = builder.append_row(full);
            if (!problem.empty()) {
                std::ostringstream message;
                message << "row " << (r + 1) << ": " << problem;
                fail(message.str(), row_locations[r]);
            }
        }
        auto next = builder.finish(&_database.runtime());
        if (!_database.catalog().replace(base, next)) {
            fail("table \"" + name +
                     "\" was changed or dropped by another statement meanwhile; nothing inserted",
                 location);
        }
        StatementResult result;
        result.tag = "INSERT 0 " + std::to_string(rows.size());
        return result;
    }

    Database &_database;
    const detail::Source &_source;
    const detail::Statement &_statement;
};

/// Runs `work`, turning every exception into an SqlError (the database stays usable).
template <class Work>
auto guarded(const detail::Source &source, std::int64_t location, Work work) -> decltype(work()) {
    try {
        return work();
    } catch (const SqlError &) {
        throw;
    } catch (const std::bad_alloc &) {
        throw source.error("out of memory", location);
    } catch (const db::TypeError &error) {
        throw source.error(error.what(), location);
    } catch (const db::CatalogError &error) {
        throw source.error(error.what(), location);
    } catch (const std::exception &error) {
        throw source.error(std::string("internal error: ") + error.what(), location);
    }
}

const Json &single_select(const detail::Source &source, const std::vector<detail::Statement> &statements) {
    if (statements.size() != 1 || detail::node_name(statements.front().node) != "SelectStmt") {
        throw source.error("expected exactly one SELECT statement",
                           statements.empty() ? -1 : statements[0].location);
    }
    return detail::node_body(statements.front().node);
}

} // namespace

Database::Database(tasking::Runtime &runtime, DatabaseOptions options)
    : _runtime(&runtime), _options(std::move(options)) {
    _options.optimizer.validate();
}

Database::~Database() = default;

Result Database::execute(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return detail::parse(source); });
    Result result;
    for (const auto &statement : statements) {
        result.statements.push_back(guarded(source, statement.location,
                                            [&] { return StatementRunner(*this, source, statement).run(); }));
    }
    return result;
}

db::QueryResult Database::query(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return detail::parse(source); });
    single_select(source, statements);
    return guarded(source, statements.front().location,
                   [&] { return StatementRunner(*this, source, statements.front()).run().rows; });
}

std::string Database::explain(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return detail::parse(source); });
    const Json &select = single_select(source, statements);
    return guarded(source, statements.front().location, [&] {
        return explain_text(
            compile_select(source, _catalog, select, statements.front().location, _options.optimizer),
            _options.execution);
    });
}

std::string Database::explain_analyze(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return detail::parse(source); });
    const Json &select = single_select(source, statements);
    return guarded(source, statements.front().location, [&] {
        return StatementRunner(*this, source, statements.front()).explain_analyze(select).text;
    });
}

db::PlanPtr Database::plan(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return detail::parse(source); });
    const Json &select = single_select(source, statements);
    return guarded(source, statements.front().location, [&] {
        return std::move(
            compile_select(source, _catalog, select, statements.front().location, _options.optimizer)
                .physical.root);
    });
}

Database::RunningQuery::RunningQuery(Database &database, const db::ExecutionOptions &options)
    : _database(database) {
    const std::lock_guard lock(database._running_mutex);
    _id = database._next_running_id++;
    database._running.push_back(Running{_id, options.cancel, options.progress});
}

Database::RunningQuery::~RunningQuery() {
    const std::lock_guard lock(_database._running_mutex);
    auto &running = _database._running;
    for (auto it = running.begin(); it != running.end(); ++it) {
        if (it->id == _id) {
            running.erase(it);
            break;
        }
    }
}

void Database::cancel(std::string_view reason) noexcept {
    const std::lock_guard lock(_running_mutex);
    for (const Running &running : _running) {
        running.cancel.cancel(reason);
    }
}

db::QueryProgress::Snapshot Database::progress() const {
    const std::lock_guard lock(_running_mutex);
    db::QueryProgress::Snapshot sum;
    for (const Running &running : _running) {
        const db::QueryProgress::Snapshot one = running.progress.snapshot();
        sum.done += std::min(one.done, one.total);
        sum.total += one.total;
    }
    return sum;
}

std::string quote_literal(std::string_view text) {
    std::string quoted{"'"};
    for (const char c : text) {
        quoted.push_back(c);
        if (c == '\'') {
            quoted.push_back('\'');
        }
    }
    quoted.push_back('\'');
    return quoted;
}

} // namespace mx::sql
