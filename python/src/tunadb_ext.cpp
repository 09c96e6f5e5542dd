// The C++ side of the tunadb Python package: a Database with its own runtime, statement results
// as whole columns (db::ColumnarResult), and their conversion to Python objects, NumPy arrays and
// the Arrow C data interface. The DB-API logic (cursors, parameters, exception classes) is Python
// (tunadb/__init__.py and friends).

#include <Python.h>
#include <datetime.h>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/types.h>
#include <mx/sql/database.h>
#include <mx/tasking/config.h>
#include <mx/tasking/runtime.h>

namespace nb = nanobind;

namespace {

using mx::db::ColumnarResult;
using mx::db::Int128;
using mx::db::PhysicalType;
using mx::db::Type;
using mx::db::TypeId;

// ------------------------------------------------------------------------------------------------
// Arrow C data interface (https://arrow.apache.org/docs/format/CDataInterface.html).
extern "C" {
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
}
constexpr int64_t arrow_flag_nullable = 2;

PyObject *g_sql_error = nullptr;    // tunadb._tunadb.EngineError (message, position, line, column)
PyObject *g_decimal_type = nullptr; // decimal.Decimal

/// A runtime and a database on it; one per Python connection.
class Engine {
public:
    Engine(std::optional<std::uint16_t> threads, std::optional<std::uint32_t> morsel_rows) {
        mx::tasking::RuntimeConfig config;
        config.workers = threads;
        _runtime = std::make_unique<mx::tasking::Runtime>(config);
        mx::sql::DatabaseOptions options;
        options.execution.columnar = true;
        if (morsel_rows.has_value()) {
            options.execution.morsel_rows = *morsel_rows;
        }
        _database = std::make_unique<mx::sql::Database>(*_runtime, options);
    }

    mx::sql::Database &database() { return *_database; }
    std::uint16_t workers() const { return _runtime->worker_count(); }

    void close() {
        _database.reset();
        _runtime.reset();
    }
    bool closed() const { return _database == nullptr; }

private:
    std::unique_ptr<mx::tasking::Runtime> _runtime;
    std::unique_ptr<mx::sql::Database> _database;
};

/// The last statement's result of an execute() call.
struct Result {
    std::string kind; // query, explain, command
    std::string tag;
    std::string text;
    std::vector<mx::db::OutputColumn> columns;
    std::shared_ptr<ColumnarResult> data; // query only

    std::size_t rows() const { return data != nullptr ? data->rows : 0; }

    const mx::db::ResultColumn &column(std::size_t index) const {
        if (data == nullptr || index >= columns.size()) {
            throw nb::index_error("no such result column");
        }
        return data->columns[index];
    }

    void check_range(std::size_t start, std::size_t stop) const {
        if (start > stop || stop > rows()) {
            throw nb::index_error("row range out of bounds");
        }
    }
};

Result run(Engine &engine, const std::string &sql) {
    if (engine.closed()) {
        throw std::runtime_error("connection is closed");
    }
    mx::sql::Result result;
    bool failed = false;
    std::string message;
    std::uint32_t position = 0;
    std::uint32_t line = 0;
    std::uint32_t column = 0;
    {
        nb::gil_scoped_release release;
        try {
            result = engine.database().execute(sql);
        } catch (const mx::sql::SqlError &error) {
            failed = true;
            message = error.message();
            position = error.position();
            line = error.line();
            column = error.column();
        } catch (const std::exception &error) {
            failed = true;
            message = std::string{"internal error: "} + error.what();
        }
    }
    if (failed) {
        nb::object args = nb::make_tuple(message, position, line, column);
        PyErr_SetObject(g_sql_error, args.ptr());
        throw nb::python_error();
    }
    Result out;
    if (result.statements.empty()) {
        out.kind = "command";
        return out;
    }
    mx::sql::StatementResult &last = result.statements.back();
    out.tag = last.tag;
    out.text = last.text;
    switch (last.kind) {
    case mx::sql::StatementKind::query:
        out.kind = "query";
        out.columns = last.rows.columns;
        out.data = last.rows.columnar;
        if (out.data == nullptr) { // an engine without columnar results for this statement
            throw std::runtime_error("query result is not columnar");
        }
        break;
    case mx::sql::StatementKind::explain:
        out.kind = "explain";
        break;
    case mx::sql::StatementKind::command:
        out.kind = "command";
        break;
    }
    return out;
}

// ------------------------------------------------------------------------------------------------
// Python objects, one value at a time (fetchone/fetchmany/fetchall).

nb::object decimal_object(Int128 unscaled, std::uint8_t scale) {
    const std::string text = mx::db::decimal::format(unscaled, scale);
    nb::object argument =
        nb::steal(PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size())));
    if (!argument.is_valid()) {
        throw nb::python_error();
    }
    PyObject *value = PyObject_CallOneArg(g_decimal_type, argument.ptr());
    if (value == nullptr) {
        throw nb::python_error();
    }
    return nb::steal(value);
}

nb::object date_object(std::int64_t days) {
    const auto civil = mx::db::date::to_civil(days);
    if (civil.year < 1 || civil.year > 9999) {
        throw nb::value_error(("date out of Python's range: " + mx::db::date::format(days)).c_str());
    }
    PyObject *value = PyDate_FromDate(static_cast<int>(civil.year), static_cast<int>(civil.month),
                                      static_cast<int>(civil.day));
    if (value == nullptr) {
        throw nb::python_error();
    }
    return nb::steal(value);
}

/// Values [start, stop) of one column as a list of Python objects (None for NULL).
nb::list to_list(const Result &result, std::size_t index, std::size_t start, std::size_t stop) {
    result.check_range(start, stop);
    const auto &column = result.column(index);
    const Type type = result.columns[index].type;
    PyObject *list = PyList_New(static_cast<Py_ssize_t>(stop - start));
    if (list == nullptr) {
        throw nb::python_error();
    }
    nb::list out = nb::steal<nb::list>(list);
    const std::uint8_t *nulls = column.nulls.get();
    const std::byte *values = column.values.get();
    const auto *i32 = reinterpret_cast<const std::int32_t *>(values);
    const auto *i64 = reinterpret_cast<const std::int64_t *>(values);
    for (std::size_t row = start; row < stop; ++row) {
        PyObject *item = nullptr;
        if (nulls != nullptr && nulls[row] != 0) {
            item = Py_NewRef(Py_None);
        } else {
            switch (type.id) {
            case TypeId::boolean:
                item = PyBool_FromLong(static_cast<long>(values[row]));
                break;
            case TypeId::integer:
                item = PyLong_FromLong(i32[row]);
                break;
            case TypeId::bigint:
                item = PyLong_FromLongLong(i64[row]);
                break;
            case TypeId::float64:
                item = PyFloat_FromDouble(reinterpret_cast<const double *>(values)[row]);
                break;
            case TypeId::date:
                item = date_object(i32[row]).release().ptr();
                break;
            case TypeId::decimal: {
                Int128 unscaled = 0;
                std::memcpy(&unscaled, values + row * 16, 16);
                item = decimal_object(unscaled, type.scale).release().ptr();
                break;
            }
            case TypeId::varchar: {
                const std::int64_t begin = i64[row];
                const std::int64_t end = i64[row + 1];
                item = PyUnicode_DecodeUTF8(column.chars.get() + begin, end - begin, "replace");
                break;
            }
            }
        }
        if (item == nullptr) {
            throw nb::python_error();
        }
        PyList_SET_ITEM(list, static_cast<Py_ssize_t>(row - start), item);
    }
    return out;
}

// ------------------------------------------------------------------------------------------------
// NumPy: the values of a row range as an array (zero-copy where the engine's representation is
// NumPy's), and the NULL bytes.

/// Keeps a result's columns alive for as long as a NumPy array or an Arrow array points into them.
nb::capsule keeper(const std::shared_ptr<ColumnarResult> &data) {
    auto *copy = new std::shared_ptr<ColumnarResult>(data);
    return nb::capsule(
        copy, [](void *pointer) noexcept { delete static_cast<std::shared_ptr<ColumnarResult> *>(pointer); });
}

template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> owned_array(std::vector<T> &&values) {
    auto *owner = new std::vector<T>(std::move(values));
    nb::capsule capsule(owner, [](void *pointer) noexcept { delete static_cast<std::vector<T> *>(pointer); });
    return nb::ndarray<nb::numpy, T, nb::ndim<1>>(owner->data(), {owner->size()}, capsule);
}

template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> view_array(const Result &result, const void *data, std::size_t size) {
    return nb::ndarray<nb::numpy, T, nb::ndim<1>>(const_cast<void *>(data), {size}, keeper(result.data));
}

/// (values, nulls or None). BOOLEAN: uint8 0/1, INTEGER: int32, BIGINT: int64, DATE: int32 days
/// since 1970-01-01, DECIMAL: float64 (the nearest double), DOUBLE: float64, VARCHAR: a list.
nb::tuple numpy_parts(const Result &result, std::size_t index, std::size_t start, std::size_t stop) {
    result.check_range(start, stop);
    const auto &column = result.column(index);
    const Type type = result.columns[index].type;
    const std::size_t count = stop - start;
    nb::object nulls = nb::none();
    if (column.nulls != nullptr) {
        nulls = nb::cast(view_array<std::uint8_t>(result, column.nulls.get() + start, count));
    }
    nb::object values;
    const std::byte *raw = column.values.get();
    switch (type.id) {
    case TypeId::boolean:
        values = nb::cast(view_array<std::uint8_t>(result, raw + start, count));
        break;
    case TypeId::integer:
    case TypeId::date:
        values = nb::cast(view_array<std::int32_t>(result, raw + start * 4, count));
        break;
    case TypeId::bigint:
        values = nb::cast(view_array<std::int64_t>(result, raw + start * 8, count));
        break;
    case TypeId::float64:
        values = nb::cast(view_array<double>(result, raw + start * 8, count));
        break;
    case TypeId::decimal: {
        std::vector<double> wide(count);
        {
            nb::gil_scoped_release release;
            const auto divisor = static_cast<double>(mx::db::decimal::pow10(type.scale));
            for (std::size_t i = 0; i < count; ++i) {
                Int128 unscaled = 0;
                std::memcpy(&unscaled, raw + (start + i) * 16, 16);
                // Exact operands give a correctly rounded quotient; beyond 2^53 the text does.
                constexpr Int128 exact = Int128{1} << 53;
                if (unscaled < exact && unscaled > -exact && type.scale <= 22) {
                    wide[i] = static_cast<double>(unscaled) / divisor;
                } else {
                    wide[i] = std::strtod(mx::db::decimal::format(unscaled, type.scale).c_str(), nullptr);
                }
            }
        }
        values = nb::cast(owned_array(std::move(wide)));
        break;
    }
    case TypeId::varchar:
        values = to_list(result, index, start, stop);
        break;
    }
    return nb::make_tuple(values, nulls);
}

// ------------------------------------------------------------------------------------------------
// Arrow export: a struct array (one record batch) of rows [start, stop).

/// What one exported column array owns: the result (buffers pointed into) and converted buffers.
struct ChildData {
    std::shared_ptr<ColumnarResult> keep;
    std::vector<std::unique_ptr<std::byte[]>> owned;
    std::vector<const void *> buffers;
};

struct ParentData {
    std::vector<std::unique_ptr<ArrowArray>> children;
    std::vector<ArrowArray *> child_pointers;
    const void *buffers[1] = {nullptr};
};

void release_child(ArrowArray *array) {
    delete static_cast<ChildData *>(array->private_data);
    array->release = nullptr;
}

void release_parent(ArrowArray *array) {
    auto *data = static_cast<ParentData *>(array->private_data);
    for (auto &child : data->children) {
        if (child->release != nullptr) {
            child->release(child.get());
        }
    }
    delete data;
    array->release = nullptr;
}

std::unique_ptr<std::byte[]> allocate(std::size_t bytes) {
    return std::unique_ptr<std::byte[]>(new std::byte[bytes + 8]);
}

void export_column(const Result &result, std::size_t index, std::size_t start, std::size_t stop,
                   ArrowArray &out) {
    const auto &column = result.data->columns[index];
    const Type type = result.columns[index].type;
    const std::size_t count = stop - start;
    auto data = std::make_unique<ChildData>();
    data->keep = result.data;
    std::memset(&out, 0, sizeof(out));
    out.length = static_cast<int64_t>(count);

    // Validity bitmap.
    const void *validity = nullptr;
    if (column.nulls != nullptr) {
        auto bits = allocate((count + 7) / 8);
        std::memset(bits.get(), 0, (count + 7) / 8);
        auto *bytes = reinterpret_cast<std::uint8_t *>(bits.get());
        std::int64_t nulls = 0;
        const std::uint8_t *source = column.nulls.get() + start;
        for (std::size_t i = 0; i < count; ++i) {
            if (source[i] == 0) {
                bytes[i / 8] |= static_cast<std::uint8_t>(1U << (i % 8));
            } else {
                ++nulls;
            }
        }
        out.null_count = nulls;
        validity = bits.get();
        data->owned.push_back(std::move(bits));
    }
    data->buffers.push_back(validity);

    const std::byte *raw = column.values.get();
    switch (type.id) {
    case TypeId::boolean: {
        auto bits = allocate((count + 7) / 8);
        std::memset(bits.get(), 0, (count + 7) / 8);
        auto *bytes = reinterpret_cast<std::uint8_t *>(bits.get());
        const auto *source = reinterpret_cast<const std::uint8_t *>(raw) + start;
        for (std::size_t i = 0; i < count; ++i) {
            bytes[i / 8] |= static_cast<std::uint8_t>((source[i] != 0 ? 1U : 0U) << (i % 8));
        }
        data->buffers.push_back(bits.get());
        data->owned.push_back(std::move(bits));
        break;
    }
    case TypeId::integer:
    case TypeId::date:
        data->buffers.push_back(raw + start * 4);
        break;
    case TypeId::bigint:
    case TypeId::float64:
        data->buffers.push_back(raw + start * 8);
        break;
    case TypeId::decimal:
        data->buffers.push_back(raw + start * 16);
        break;
    case TypeId::varchar:
        data->buffers.push_back(raw + start * 8); // large_utf8: 64-bit offsets into the shared chars
        data->buffers.push_back(column.chars.get());
        break;
    }
    out.n_buffers = static_cast<int64_t>(data->buffers.size());
    out.buffers = data->buffers.data();
    out.release = release_child;
    out.private_data = data.release();
}

struct SchemaData {
    std::vector<std::string> strings; // formats and names, stable (reserved up front)
    std::vector<std::unique_ptr<ArrowSchema>> children;
    std::vector<ArrowSchema *> child_pointers;
};

void release_schema_child(ArrowSchema *schema) { schema->release = nullptr; }

void release_schema(ArrowSchema *schema) {
    auto *data = static_cast<SchemaData *>(schema->private_data);
    for (auto &child : data->children) {
        if (child->release != nullptr) {
            child->release(child.get());
        }
    }
    delete data;
    schema->release = nullptr;
}

std::string arrow_format(const Type &type) {
    switch (type.id) {
    case TypeId::boolean:
        return "b";
    case TypeId::integer:
        return "i";
    case TypeId::bigint:
        return "l";
    case TypeId::float64:
        return "g";
    case TypeId::date:
        return "tdD";
    case TypeId::decimal:
        return "d:" + std::to_string(type.precision) + "," + std::to_string(type.scale);
    case TypeId::varchar:
        return "U";
    }
    return "n";
}

void export_schema(const Result &result, ArrowSchema &out) {
    auto data = std::make_unique<SchemaData>();
    const std::size_t n = result.columns.size();
    data->strings.reserve(2 * n + 1);
    data->strings.emplace_back("+s");
    std::memset(&out, 0, sizeof(out));
    out.format = data->strings.back().c_str();
    out.name = "";
    for (const auto &column : result.columns) {
        auto child = std::make_unique<ArrowSchema>();
        std::memset(child.get(), 0, sizeof(ArrowSchema));
        data->strings.push_back(arrow_format(column.type));
        child->format = data->strings.back().c_str();
        data->strings.push_back(column.name);
        child->name = data->strings.back().c_str();
        child->flags = arrow_flag_nullable;
        child->release = release_schema_child;
        data->child_pointers.push_back(child.get());
        data->children.push_back(std::move(child));
    }
    out.n_children = static_cast<int64_t>(n);
    out.children = data->child_pointers.data();
    out.release = release_schema;
    out.private_data = data.release();
}

nb::tuple arrow_capsules(const Result &result, std::size_t start, std::size_t stop) {
    if (result.data == nullptr) {
        throw std::runtime_error("not a query result");
    }
    result.check_range(start, stop);
    auto *schema = new ArrowSchema;
    export_schema(result, *schema);
    auto *array = new ArrowArray;
    {
        auto parent = std::make_unique<ParentData>();
        std::memset(array, 0, sizeof(ArrowArray));
        const std::size_t n = result.columns.size();
        {
            nb::gil_scoped_release release;
            for (std::size_t c = 0; c < n; ++c) {
                auto child = std::make_unique<ArrowArray>();
                export_column(result, c, start, stop, *child);
                parent->child_pointers.push_back(child.get());
                parent->children.push_back(std::move(child));
            }
        }
        array->length = static_cast<int64_t>(stop - start);
        array->n_buffers = 1;
        array->buffers = parent->buffers;
        array->n_children = static_cast<int64_t>(n);
        array->children = parent->child_pointers.data();
        array->release = release_parent;
        array->private_data = parent.release();
    }
    nb::capsule schema_capsule(schema, "arrow_schema", [](void *pointer) noexcept {
        auto *s = static_cast<ArrowSchema *>(pointer);
        if (s->release != nullptr) {
            s->release(s);
        }
        delete s;
    });
    nb::capsule array_capsule(array, "arrow_array", [](void *pointer) noexcept {
        auto *a = static_cast<ArrowArray *>(pointer);
        if (a->release != nullptr) {
            a->release(a);
        }
        delete a;
    });
    return nb::make_tuple(schema_capsule, array_capsule);
}

} // namespace

NB_MODULE(_tunadb, m) {
    // Connections still open at exit are closed by an atexit hook (tunadb/connection.py); what
    // remains are module objects Python does not free at exit.
    nb::set_leak_warnings(false);
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == nullptr) {
        throw nb::python_error();
    }
    nb::module_ decimal = nb::module_::import_("decimal");
    g_decimal_type = decimal.attr("Decimal").ptr();
    Py_INCREF(g_decimal_type);
    g_sql_error = PyErr_NewException("tunadb._tunadb.EngineError", PyExc_Exception, nullptr);
    m.attr("EngineError") = nb::handle(g_sql_error);

    nb::class_<Engine>(m, "Engine")
        .def(nb::init<std::optional<std::uint16_t>, std::optional<std::uint32_t>>(),
             nb::arg("threads").none(), nb::arg("morsel_rows").none(),
             nb::call_guard<nb::gil_scoped_release>())
        .def("execute", &run, nb::arg("sql"))
        .def(
            "cancel",
            [](Engine &engine, const std::string &reason) {
                if (!engine.closed()) {
                    engine.database().cancel(reason);
                }
            },
            nb::arg("reason"), nb::call_guard<nb::gil_scoped_release>())
        .def("progress",
             [](Engine &engine) {
                 if (engine.closed()) {
                     return std::pair<std::uint64_t, std::uint64_t>{0, 0};
                 }
                 const auto snapshot = engine.database().progress();
                 return std::pair<std::uint64_t, std::uint64_t>{snapshot.done, snapshot.total};
             })
        .def("tables",
             [](Engine &engine) {
                 return engine.closed() ? std::vector<std::string>{} : engine.database().catalog().names();
             })
        .def_prop_ro("workers", &Engine::workers)
        .def_prop_ro("closed", &Engine::closed)
        .def("close", &Engine::close, nb::call_guard<nb::gil_scoped_release>());

    nb::class_<Result>(m, "Result")
        .def_ro("kind", &Result::kind)
        .def_ro("tag", &Result::tag)
        .def_ro("text", &Result::text)
        .def_prop_ro("rows", &Result::rows)
        .def_prop_ro("columns",
                     [](const Result &result) {
                         nb::list columns;
                         for (const auto &column : result.columns) {
                             columns.append(nb::make_tuple(column.name, mx::db::type_id_name(column.type.id),
                                                           column.type.precision, column.type.scale,
                                                           column.type.length, column.nullable));
                         }
                         return columns;
                     })
        .def("to_list", &to_list, nb::arg("column"), nb::arg("start"), nb::arg("stop"))
        .def("numpy_parts", &numpy_parts, nb::arg("column"), nb::arg("start"), nb::arg("stop"))
        .def("arrow_capsules", &arrow_capsules, nb::arg("start"), nb::arg("stop"));
}
