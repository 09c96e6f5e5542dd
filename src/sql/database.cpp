#include <mx/sql/database.h>

#include <algorithm>
#include <cctype>
#include <new>
#include <sstream>

#include <mx/db/loader.h>

#include "ast_from_json.h"
#include "binder.h"
#include "optimizer.h"
#include "parser.h"
#include "physical.h"

namespace mx::sql {

namespace {

using detail::lower;

/// A SELECT compiled down to its physical plan.
struct Compiled {
    detail::PhysicalPlan physical;
    std::vector<std::string> names;
    /// The optimizer's notes (the passes that ran and those that were off, what the optional
    /// ones did).
    std::vector<std::string> notes;
};

Compiled compile_select(const detail::Source &source, db::Catalog &catalog, const ast::SelectStmt &select,
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
    StatementRunner(Database &database, const detail::Source &source, const ast::Statement &statement)
        : _database(database), _source(source), _statement(statement) {}

    StatementResult run() {
        if (const auto *select = std::get_if<ast::SelectPtr>(&_statement.node)) {
            return this->select(**select);
        }
        if (const auto *statement = std::get_if<ast::Explain>(&_statement.node)) {
            return explain(*statement);
        }
        if (const auto *statement = std::get_if<ast::CreateTable>(&_statement.node)) {
            return create_table(*statement);
        }
        if (const auto *statement = std::get_if<ast::DropTable>(&_statement.node)) {
            return drop(*statement);
        }
        if (const auto *statement = std::get_if<ast::Copy>(&_statement.node)) {
            return copy(*statement);
        }
        if (const auto *statement = std::get_if<ast::Insert>(&_statement.node)) {
            return insert(*statement);
        }
        const std::string &kind = std::get<ast::OtherStatement>(_statement.node).kind;
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
    StatementResult explain_analyze(const ast::SelectStmt &select) {
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

    StatementResult select(const ast::SelectStmt &statement) {
        Compiled compiled = compile_select(_source, _database.catalog(), statement, _statement.location,
                                           _database.options().optimizer);
        StatementResult result;
        result.kind = StatementKind::query;
        result.rows = run_plan(*compiled.physical.root);
        result.tag = "SELECT " + std::to_string(result.rows.row_count());
        return result;
    }

    StatementResult explain(const ast::Explain &statement) {
        bool analyze = false;
        for (const ast::ExplainOption &option : statement.options) {
            if (option.name == "analyze") {
                analyze = true;
            } else {
                fail("EXPLAIN option not supported: " + option.name + " (supported: ANALYZE)",
                     option.location);
            }
        }
        const auto *query = std::get_if<ast::SelectPtr>(&statement.statement->node);
        if (query == nullptr) {
            fail("EXPLAIN supports SELECT statements only", statement.statement_location);
        }
        if (analyze) {
            return explain_analyze(**query);
        }
        Compiled compiled = compile_select(_source, _database.catalog(), **query, _statement.location,
                                           _database.options().optimizer);
        StatementResult result;
        result.kind = StatementKind::explain;
        result.tag = "EXPLAIN";
        result.text = explain_text(compiled, _database.options().execution);
        return result;
    }

    StatementResult create_table(const ast::CreateTable &statement) {
        const std::string &name = statement.table.name;
        const std::int64_t location = statement.table_location;
        if (statement.inherits_or_partitioned) {
            fail("table inheritance and partitioning are not supported", location);
        }
        const std::string &schema = statement.table.schema;
        if (!schema.empty() && lower(schema) != "main" && lower(schema) != "public") {
            fail("schemas are not supported: \"" + schema + "\"", location);
        }
        detail::ColumnRegistry registry;
        detail::Binder binder(_source, _database.catalog(), registry, _statement.location);
        std::vector<db::ColumnDef> columns;
        for (const auto &element : statement.elements) {
            if (const auto *constraint = std::get_if<ast::TableConstraint>(&element)) {
                if (constraint->kind == ast::TableConstraint::Kind::other) {
                    fail("table constraints other than PRIMARY KEY, UNIQUE and FOREIGN KEY are not supported",
                         constraint->location >= 0 ? constraint->location : location);
                }
                continue;
            }
            if (const auto *other = std::get_if<ast::OtherTableElement>(&element)) {
                fail("unsupported table element " + other->kind, other->location);
            }
            const auto &definition = std::get<ast::ColumnDefinition>(element);
            db::ColumnDef column;
            column.name = definition.name;
            column.type = binder.bind_type(definition.type);
            for (const auto &constraint : definition.constraints) {
                using Constraint = ast::ColumnDefinition::Constraint;
                const std::int64_t at = constraint.location;
                switch (constraint.kind) {
                case Constraint::not_null:
                    column.nullable = false;
                    break;
                case Constraint::primary_key:
                    // PostgreSQL: a primary key column is NOT NULL; uniqueness is not enforced.
                    column.nullable = false;
                    break;
                case Constraint::null:
                    column.nullable = true;
                    break;
                case Constraint::unique:
                case Constraint::foreign_key:
                    break; // accepted, not enforced
                case Constraint::default_value:
                    fail("DEFAULT values are not supported", at);
                case Constraint::check:
                    fail("CHECK constraints are not supported", at);
                case Constraint::other:
                    fail("column constraint not supported", at);
                }
            }
            if (definition.collate) {
                fail("COLLATE is not supported", definition.location);
            }
            columns.push_back(std::move(column));
        }
        for (const auto &element : statement.elements) {
            const auto *constraint = std::get_if<ast::TableConstraint>(&element);
            if (constraint == nullptr || constraint->kind != ast::TableConstraint::Kind::primary_key) {
                continue;
            }
            for (const std::string &key : constraint->keys) {
                const std::string key_name = lower(key);
                bool found = false;
                for (auto &column : columns) {
                    if (lower(column.name) == key_name) {
                        column.nullable = false;
                        found = true;
                    }
                }
                if (!found) {
                    fail("column \"" + key + "\" named in key does not exist", constraint->location);
                }
            }
        }
        if (_database.catalog().find(name) != nullptr) {
            if (statement.if_not_exists) {
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

    StatementResult drop(const ast::DropTable &statement) {
        if (!statement.tables) {
            fail("only DROP TABLE is supported", -1);
        }
        const bool if_exists = statement.if_exists;
        std::vector<std::string> names;
        for (const std::vector<std::string> &parts : statement.names) {
            if (parts.empty()) {
                fail("invalid table name in DROP TABLE", -1);
            }
            if (parts.size() > 1) {
                const std::string schema = lower(parts[0]);
                if (parts.size() > 2 || (schema != "main" && schema != "public")) {
                    fail("schemas are not supported", -1);
                }
            }
            const std::string &name = parts.back();
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

    StatementResult copy(const ast::Copy &statement) {
        if (!statement.table.has_value()) {
            fail("COPY (query) TO is not supported; use COPY table FROM 'file'", -1);
        }
        const std::string &name = statement.table->name;
        const std::int64_t location = statement.table_location;
        if (!statement.from) {
            fail("COPY ... TO is not supported (only COPY table FROM 'file')", -1);
        }
        if (statement.has_columns) {
            fail("COPY with a column list is not supported", location);
        }
        if (statement.has_where) {
            fail("COPY ... WHERE is not supported", location);
        }
        const std::string &file = statement.file;
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
        for (const ast::CopyOption &option : statement.options) {
            using Kind = ast::CopyOption::Kind;
            const std::string option_name = lower(option.name);
            const std::int64_t at = option.location;
            auto text = [&]() -> std::string {
                if (option.kind == Kind::string) {
                    return option.text;
                }
                if (option.kind == Kind::integer) {
                    return std::to_string(option.integer);
                }
                fail("option \"" + option_name + "\" needs a value", at);
            };
            auto flag = [&]() -> bool {
                if (option.kind == Kind::none) {
                    return true;
                }
                if (option.kind == Kind::boolean) {
                    return option.boolean;
                }
                if (option.kind == Kind::integer && (option.integer == 0 || option.integer == 1)) {
                    return option.integer == 1;
                }
                const std::string value = option.kind == Kind::string ? lower(option.text) : "";
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

    StatementResult insert(const ast::Insert &statement) {
        const std::string &name = statement.table.name;
        const std::int64_t location = statement.table_location;
        if (statement.unsupported_clauses) {
            fail("INSERT with ON CONFLICT, RETURNING or WITH is not supported", location);
        }
        auto base = _database.catalog().find(name);
        if (base == nullptr) {
            fail("table \"" + name + "\" does not exist", location);
        }
        const db::Schema &schema = base->schema();
        // Target columns: the list given, or all in order.
        std::vector<std::size_t> targets;
        for (const ast::InsertColumn &column : statement.columns) {
            const std::string &column_name = column.name;
            const auto index = schema.find(column_name);
            if (!index.has_value()) {
                fail("column \"" + column_name + "\" of table \"" + name + "\" does not exist",
                     column.location);
            }
            if (std::find(targets.begin(), targets.end(), *index) != targets.end()) {
                fail("column \"" + column_name + "\" specified more than once", column.location);
            }
            targets.push_back(*index);
        }
        if (targets.empty()) {
            for (std::size_t i = 0; i < schema.size(); ++i) {
                targets.push_back(i);
            }
        }
        if (statement.query == nullptr) {
            fail("INSERT supports VALUES and SELECT only", location);
        }
        const ast::SelectStmt &select = *statement.query;
        std::vector<std::vector<db::Value>> rows;
        std::vector<std::int64_t> row_locations;
        if (select.kind == ast::SelectStmt::Kind::values) {
            detail::ColumnRegistry registry;
            detail::Binder binder(_source, _database.catalog(), registry, _statement.location);
            for (const std::vector<ast::ExprPtr> &items : select.values) {
                const std::int64_t row_location = items.empty() ? location : items.front()->location;
                if (items.size() != targets.size()) {
                    fail(items.size() > targets.size() ? "INSERT has more expressions than target columns"
                                                       : "INSERT has more target columns than expressions",
                         row_location);
                }
                std::vector<db::Value> row;
                for (const ast::ExprPtr &item : items) {
                    if (item->is<ast::SetToDefault>()) {
                        fail("DEFAULT is not supported", item->location);
                    }
                    db::ExprPtr value = binder.bind_constant(*item);
                    if (value->kind() != db::ExprKind::constant) {
                        fail("INSERT values must be constants", item->location);
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
    const ast::Statement &_statement;
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

/// Parses `source` into typed parse trees (the JSON of libpg_query lives only while converting).
std::vector<ast::Statement> parse_statements(const detail::Source &source) {
    std::vector<ast::Statement> statements;
    for (const detail::Statement &statement : detail::parse(source)) {
        statements.push_back(detail::to_ast(statement));
    }
    return statements;
}

const ast::SelectStmt &single_select(const detail::Source &source,
                                     const std::vector<ast::Statement> &statements) {
    const auto *select =
        statements.size() == 1 ? std::get_if<ast::SelectPtr>(&statements.front().node) : nullptr;
    if (select == nullptr) {
        throw source.error("expected exactly one SELECT statement",
                           statements.empty() ? -1 : statements[0].location);
    }
    return **select;
}

} // namespace

Database::Database(tasking::Runtime &runtime, DatabaseOptions options)
    : _runtime(&runtime), _options(std::move(options)) {
    _options.optimizer.validate();
}

Database::~Database() = default;

Result Database::execute(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return parse_statements(source); });
    Result result;
    for (const auto &statement : statements) {
        result.statements.push_back(guarded(source, statement.location,
                                            [&] { return StatementRunner(*this, source, statement).run(); }));
    }
    return result;
}

db::QueryResult Database::query(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return parse_statements(source); });
    single_select(source, statements);
    return guarded(source, statements.front().location,
                   [&] { return StatementRunner(*this, source, statements.front()).run().rows; });
}

std::string Database::explain(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return parse_statements(source); });
    const ast::SelectStmt &select = single_select(source, statements);
    return guarded(source, statements.front().location, [&] {
        return explain_text(
            compile_select(source, _catalog, select, statements.front().location, _options.optimizer),
            _options.execution);
    });
}

std::string Database::explain_analyze(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return parse_statements(source); });
    const ast::SelectStmt &select = single_select(source, statements);
    return guarded(source, statements.front().location, [&] {
        return StatementRunner(*this, source, statements.front()).explain_analyze(select).text;
    });
}

db::PlanPtr Database::plan(std::string_view sql) {
    const detail::Source source(sql);
    const auto statements = guarded(source, -1, [&] { return parse_statements(source); });
    const ast::SelectStmt &select = single_select(source, statements);
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
