#include <mx/db/catalog.h>

#include <cctype>
#include <utility>

namespace mx::db {

std::string Catalog::key(std::string_view name) {
    std::string folded(name);
    for (char &c : folded) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return folded;
}

std::shared_ptr<const Table> Catalog::create_table(std::string_view name, Schema schema,
                                                   TableOptions options) {
    if (name.empty()) {
        throw CatalogError{"a table needs a name"};
    }
    if (std::string problem = schema.validate(); !problem.empty()) {
        throw CatalogError{std::string("CREATE TABLE ").append(name).append(": ").append(problem)};
    }
    if (options.fragment_capacity < 1 || options.fragment_capacity > TableOptions::max_fragment_capacity) {
        throw CatalogError{std::string("CREATE TABLE ")
                               .append(name)
                               .append(": fragment capacity must be 1 to ")
                               .append(std::to_string(TableOptions::max_fragment_capacity))};
    }
    std::shared_ptr<const Table> table = Table::empty(std::string(name), std::move(schema), options);
    std::lock_guard lock{_mutex};
    if (!_tables.emplace(key(name), table).second) {
        throw CatalogError{std::string("table ").append(name).append(" already exists")};
    }
    return table;
}

void Catalog::add_table(std::shared_ptr<const Table> table) {
    MX_ASSERT(table != nullptr, "add_table(nullptr)");
    std::string folded = key(table->name());
    std::lock_guard lock{_mutex};
    if (_tables.contains(folded)) {
        throw CatalogError{std::string("table ").append(table->name()).append(" already exists")};
    }
    _tables.emplace(std::move(folded), std::move(table));
}

bool Catalog::drop_table(std::string_view name, bool if_exists) {
    std::shared_ptr<const Table> dropped; // released after the lock: freeing a table takes a while
    {
        std::lock_guard lock{_mutex};
        const auto it = _tables.find(key(name));
        if (it == _tables.end()) {
            if (if_exists) {
                return false;
            }
            throw CatalogError{std::string("table ").append(name).append(" does not exist")};
        }
        dropped = std::move(it->second);
        _tables.erase(it);
    }
    return true;
}

std::shared_ptr<const Table> Catalog::find(std::string_view name) const {
    const std::string folded = key(name);
    std::lock_guard lock{_mutex};
    const auto it = _tables.find(folded);
    return it == _tables.end() ? nullptr : it->second;
}

std::vector<std::string> Catalog::names() const {
    std::vector<std::string> result;
    std::lock_guard lock{_mutex};
    result.reserve(_tables.size());
    for (const auto &[folded, table] : _tables) {
        result.push_back(table->name());
    }
    return result; // the map orders by the folded name
}

bool Catalog::replace(const std::shared_ptr<const Table> &expected, std::shared_ptr<const Table> next) {
    MX_ASSERT(expected != nullptr && next != nullptr, "replace needs both versions");
    std::shared_ptr<const Table> previous; // released after the lock
    std::lock_guard lock{_mutex};
    const auto it = _tables.find(key(expected->name()));
    if (it == _tables.end() || it->second != expected) {
        return false;
    }
    previous = std::exchange(it->second, std::move(next));
    return true;
}

} // namespace mx::db
