// Parallel loading of delimited text files, as a pipeline. The mapped file is cut into chunks at
// line breaks; one task per chunk parses its lines into a staged chunk (values column-wise,
// strings as references into the mapping or as local dictionary codes) and hands it to a
// FragmentStream (storage_build.h). The stream takes the chunks in file order, and as soon as a
// fragment's rows are all parsed, one task on the fragment's NUMA region copies them into the
// fragment; a chunk is freed (and its pages of the mapping given back) once its rows are in
// fragments. The stream starts the next chunk's task only while few chunks are held (a few per
// worker, besides those waiting for the fragment being filled), so memory stays bounded however
// large the file is, while every worker parses. Dictionary codes are final only when every chunk
// is in: the stream's finish() maps them in place. Nothing is published unless every chunk
// parses and every fragment is built.

#include <mx/db/loader.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mx/tasking/runtime.h>
#include <mx/tasking/task_group.h>

#include "loader_progress.h"
#include "storage_build.h"

namespace mx::db {

namespace {

/// A read-only private mapping of a whole file.
class MappedFile {
public:
    MappedFile() = default;
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;
    ~MappedFile() {
        if (_data != nullptr) {
            munmap(_data, _size);
        }
    }

    /// "" on success, otherwise why the file cannot be read.
    std::string open(const std::string &path) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return std::string("cannot open ").append(path).append(": ").append(std::strerror(errno));
        }
        struct stat status {};
        if (fstat(fd, &status) != 0) {
            std::string error =
                std::string("cannot read ").append(path).append(": ").append(std::strerror(errno));
            ::close(fd);
            return error;
        }
        if (!S_ISREG(status.st_mode)) {
            ::close(fd);
            return std::string("cannot load ").append(path).append(": not a regular file");
        }
        _size = static_cast<std::size_t>(status.st_size);
        if (_size > 0) {
            void *data = mmap(nullptr, _size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (data == MAP_FAILED) {
                std::string error =
                    std::string("cannot map ").append(path).append(": ").append(std::strerror(errno));
                ::close(fd);
                _size = 0;
                return error;
            }
            _data = data;
            madvise(_data, _size, MADV_SEQUENTIAL);
        }
        ::close(fd);
        return {};
    }

    /// Drops the whole pages of bytes [begin, end) from the process (a later read maps them from
    /// the file again).
    void release(std::size_t begin, std::size_t end) const noexcept {
        static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        const std::size_t from = (begin + page - 1) / page * page;
        const std::size_t to = std::min(end, _size) / page * page;
        if (_data != nullptr && to > from) {
            madvise(static_cast<char *>(_data) + from, to - from, MADV_DONTNEED);
        }
    }

    [[nodiscard]] const char *data() const noexcept { return static_cast<const char *>(_data); }
    [[nodiscard]] std::size_t size() const noexcept { return _size; }

private:
    void *_data{nullptr};
    std::size_t _size{0};
};

bool ends_with(std::string_view text, std::string_view suffix) noexcept {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

char default_delimiter(std::string_view path) noexcept {
    // dbgen writes name.tbl, or name.tbl.N when it splits a table.
    const std::size_t slash = path.find_last_of('/');
    const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
    return ends_with(file, ".tbl") || file.find(".tbl.") != std::string_view::npos ? '|' : ',';
}

/// The byte offset of the first byte that is not part of a well-formed UTF-8 sequence (truncated,
/// overlong, a surrogate, above U+10FFFF, a stray continuation byte), or npos when `text` is
/// valid UTF-8.
std::size_t invalid_utf8_at(std::string_view text) noexcept {
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n) {
        const auto b0 = static_cast<unsigned char>(text[i]);
        if (b0 < 0x80U) {
            ++i;
            continue;
        }
        std::size_t length = 0;
        unsigned char low = 0x80U; // bounds of the second byte (excludes overlongs and surrogates)
        unsigned char high = 0xBFU;
        if (b0 >= 0xC2U && b0 <= 0xDFU) {
            length = 2;
        } else if (b0 >= 0xE0U && b0 <= 0xEFU) {
            length = 3;
            low = b0 == 0xE0U ? 0xA0U : 0x80U;
            high = b0 == 0xEDU ? 0x9FU : 0xBFU;
        } else if (b0 >= 0xF0U && b0 <= 0xF4U) {
            length = 4;
            low = b0 == 0xF0U ? 0x90U : 0x80U;
            high = b0 == 0xF4U ? 0x8FU : 0xBFU;
        } else {
            return i;
        }
        if (i + length > n) {
            return i;
        }
        for (std::size_t k = 1; k < length; ++k) {
            const auto b = static_cast<unsigned char>(text[i + k]);
            if (k == 1 ? (b < low || b > high) : (b < 0x80U || b > 0xBFU)) {
                return i;
            }
        }
        i += length;
    }
    return std::string_view::npos;
}

std::string quoted_excerpt(std::string_view text) {
    constexpr std::size_t limit = 40;
    std::string out = "\"";
    out.append(text.substr(0, limit));
    if (text.size() > limit) {
        out.append("...");
    }
    return out.append("\"");
}

bool is_decimal_syntax(std::string_view text) noexcept {
    std::size_t i = 0;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
        ++i;
    }
    bool digits = false;
    bool point = false;
    for (; i < text.size(); ++i) {
        if (text[i] >= '0' && text[i] <= '9') {
            digits = true;
        } else if (text[i] == '.' && !point) {
            point = true;
        } else {
            return false;
        }
    }
    return digits;
}

std::optional<bool> parse_boolean(std::string_view text) noexcept {
    if (text.size() > 5) {
        return std::nullopt;
    }
    char lower[5];
    for (std::size_t i = 0; i < text.size(); ++i) {
        lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    }
    const std::string_view word(lower, text.size());
    if (word == "true" || word == "t" || word == "1") {
        return true;
    }
    if (word == "false" || word == "f" || word == "0") {
        return false;
    }
    return std::nullopt;
}

/// The first error of a chunk, in chunk-local terms (the line is numbered within the chunk).
struct ChunkError {
    std::uint64_t line{0};
    std::size_t line_offset{0}; // where the line starts in the file
    std::size_t position{0};    // byte offset of the offending field in the line
    std::string message;
};

/// Everything the parse tasks share. The per-chunk slots are written by the chunk's task only
/// and read by the loading thread after the task group's wait().
struct LoadState {
    const CsvOptions *options{nullptr};
    char delimiter{'|'};
    const MappedFile *mapping{nullptr};
    const char *file{nullptr};
    detail::TableBuild *build{nullptr};
    detail::FragmentStream *stream{nullptr};
    tasking::TaskGroup *group{nullptr};
    ProgressBar *progress{nullptr};
    std::vector<std::pair<std::size_t, std::size_t>> ranges; // [begin, end) of each chunk
    std::vector<std::uint64_t> lines; // lines of each chunk (counted to number errors globally)
    std::vector<std::unique_ptr<ChunkError>> errors;
    // Lowest chunk index with an error; written by any parse task (fetch-min), read by all of
    // them to give up on chunks after it (their errors would not be reported anyway).
    std::atomic<std::size_t> first_error{std::numeric_limits<std::size_t>::max()};

    void report_error(std::size_t chunk) noexcept {
        std::size_t current = first_error.load(std::memory_order_relaxed);
        while (chunk < current &&
               !first_error.compare_exchange_weak(current, chunk, std::memory_order_relaxed)) {
        }
    }
};

/// Parses the lines of one chunk.
class ChunkParser {
public:
    ChunkParser(LoadState &state, std::size_t index) noexcept : _state(state), _index(index) {}

    void run() noexcept {
        try {
            parse();
        } catch (const std::bad_alloc &) {
            fail(_line_begin, _line_begin, "out of memory while parsing");
        }
        const bool failed = _state.errors[_index] != nullptr;
        if (failed) {
            _state.report_error(_index);
        }
        // A chunk that failed or gave up stops the stream: nothing will be published.
        _state.stream->add(_index, _complete && !failed ? std::move(_owned) : nullptr);
    }

private:
    void parse() {
        const auto [begin, end] = _state.ranges[_index];
        const char *text = _state.file;
        _owned = _state.build->new_chunk();
        _chunk = _owned.get();
        const Schema &schema = _state.build->schema();
        _columns = schema.size();

        // Count the lines first so the staging vectors are allocated once.
        std::size_t estimated_rows = 1;
        for (const char *p = text + begin; p < text + end;) {
            const void *newline = std::memchr(p, '\n', static_cast<std::size_t>(text + end - p));
            if (newline == nullptr) {
                break;
            }
            ++estimated_rows;
            p = static_cast<const char *>(newline) + 1;
        }
        reserve(estimated_rows);

        std::size_t reported = begin;
        const char *p = text + begin;
        const char *const chunk_end = text + end;
        while (p < chunk_end) {
            const void *newline = std::memchr(p, '\n', static_cast<std::size_t>(chunk_end - p));
            const char *line_end = newline != nullptr ? static_cast<const char *>(newline) : chunk_end;
            const char *next = newline != nullptr ? line_end + 1 : chunk_end;
            ++_line;
            _line_begin = p;
            const char *content_end = line_end;
            if (content_end > p && content_end[-1] == '\r') {
                --content_end;
            }
            const bool header = _index == 0 && _line == 1 && _state.options->header;
            if (!header && content_end > p) {
                if (!parse_line(p, content_end)) {
                    return;
                }
                ++_chunk->rows;
            }
            p = next;
            if ((_line & 1023U) == 0) {
                const auto done = static_cast<std::size_t>(p - text);
                _state.progress->add(done - reported);
                reported = done;
                if (_state.first_error.load(std::memory_order_relaxed) < _index) {
                    return; // an earlier chunk failed: this one's rows will not be used
                }
            }
        }
        _state.progress->add(end - reported);
        _state.lines[_index] = _line;
        detail::TableBuild::seal(*_chunk);
        _complete = true;
    }

    void reserve(std::size_t rows) {
        for (detail::ColumnStaging &column : _chunk->columns) {
            switch (column.type.physical()) {
            case PhysicalType::u8:
                column.u8.reserve(rows);
                break;
            case PhysicalType::i64:
                column.i64.reserve(rows);
                break;
            case PhysicalType::i128:
                column.i128.reserve(rows);
                break;
            case PhysicalType::f64:
                column.f64.reserve(rows);
                break;
            case PhysicalType::string:
                if (column.tracking) {
                    column.codes.reserve(rows);
                } else {
                    column.strings.reserve(rows);
                }
                break;
            }
        }
    }

    bool fail(const char *line_begin, const char *at, std::string message) {
        auto error = std::make_unique<ChunkError>();
        error->line = _line;
        error->line_offset = static_cast<std::size_t>(line_begin - _state.file);
        error->position = static_cast<std::size_t>(at - line_begin);
        error->message = std::move(message);
        _state.errors[_index] = std::move(error);
        return false;
    }

    bool field_count_error(const char *begin, const char *at, std::size_t fields) {
        return fail(begin, at,
                    std::string("expected ")
                        .append(std::to_string(_columns))
                        .append(_columns == 1 ? " field, got " : " fields, got ")
                        .append(std::to_string(fields)));
    }

    bool parse_line(const char *begin, const char *end) {
        const char delimiter = _state.delimiter;
        const std::optional<char> quote = _state.options->quote;
        const char *p = begin;
        for (std::size_t c = 0; c < _columns; ++c) {
            const char *field_begin = p;
            StringRef content;
            bool quoted = false;
            if (quote && p < end && *p == *quote) {
                quoted = true;
                const char *from = p + 1;
                bool escaped = false;
                const char *closing = nullptr;
                while (true) {
                    const void *found = std::memchr(from, *quote, static_cast<std::size_t>(end - from));
                    if (found == nullptr) {
                        return fail(begin, field_begin,
                                    std::string("column ")
                                        .append(_state.build->schema()[c].name)
                                        .append(": unterminated quoted field"));
                    }
                    const char *q = static_cast<const char *>(found);
                    if (q + 1 < end && q[1] == *quote) {
                        escaped = true;
                        from = q + 2;
                        continue;
                    }
                    closing = q;
                    break;
                }
                p = closing + 1;
                if (p < end && *p != delimiter) {
                    return fail(begin, p,
                                std::string("column ")
                                    .append(_state.build->schema()[c].name)
                                    .append(": unexpected character after the closing quote"));
                }
                const std::string_view inner(field_begin + 1,
                                             static_cast<std::size_t>(closing - field_begin - 1));
                if (escaped) {
                    std::string unescaped;
                    unescaped.reserve(inner.size());
                    for (std::size_t i = 0; i < inner.size(); ++i) {
                        unescaped.push_back(inner[i]);
                        if (inner[i] == *quote) {
                            ++i; // the second quote of a doubled pair
                        }
                    }
                    content = _chunk->heap.add(unescaped);
                } else {
                    content = StringRef(inner);
                }
            } else {
                const void *found = std::memchr(p, delimiter, static_cast<std::size_t>(end - p));
                const char *field_end = found != nullptr ? static_cast<const char *>(found) : end;
                content = StringRef(p, static_cast<std::uint32_t>(field_end - p));
                p = field_end;
            }
            if (!store(c, content, quoted, begin, field_begin)) {
                return false;
            }
            if (c + 1 < _columns) {
                if (p == end) {
                    return field_count_error(begin, end, c + 1);
                }
                ++p; // the delimiter
            }
        }
        if (p != end) {
            // p is at a delimiter after the last column.
            if (_state.options->trailing_delimiter && p + 1 == end) {
                return true;
            }
            std::size_t fields = _columns;
            for (const char *q = p; q < end; ++q) {
                fields += *q == delimiter ? 1U : 0U;
            }
            if (_state.options->trailing_delimiter && end[-1] == delimiter) {
                --fields;
            }
            return field_count_error(begin, p + 1, fields);
        }
        return true;
    }

    bool type_error(std::size_t c, const char *line, const char *field, std::string what) {
        return fail(line, field,
                    std::string("column ").append(_state.build->schema()[c].name).append(": ").append(what));
    }

    bool expected(std::size_t c, const char *line, const char *field, std::string_view text) {
        const Type type = _state.build->schema()[c].type;
        std::string what = std::string("expected ").append(type.to_string());
        if (type.id == TypeId::date) {
            what.append(" (YYYY-MM-DD)");
        }
        return type_error(c, line, field, what.append(", got ").append(quoted_excerpt(text)));
    }

    bool out_of_range(std::size_t c, const char *line, const char *field, std::string_view text) {
        return type_error(c, line, field,
                          std::string("value ")
                              .append(quoted_excerpt(text))
                              .append(" out of range for ")
                              .append(_state.build->schema()[c].type.to_string()));
    }

    bool store(std::size_t c, StringRef content, bool quoted, const char *line, const char *field) {
        const ColumnDef &definition = _state.build->schema()[c];
        detail::ColumnStaging &column = _chunk->columns[c];
        const std::string_view text = content.view();
        const Type type = definition.type;
        if (!quoted && text == _state.options->null_string) {
            if (definition.nullable) {
                detail::TableBuild::stage_null(column, _chunk->rows);
                return true;
            }
            if (!(type.id == TypeId::varchar && text.empty())) {
                return type_error(c, line, field,
                                  text.empty() ? std::string("empty field in a NOT NULL column")
                                               : std::string("NULL (")
                                                     .append(quoted_excerpt(text))
                                                     .append(") in a NOT NULL column"));
            }
        }
        switch (type.id) {
        case TypeId::boolean: {
            const auto value = parse_boolean(text);
            if (!value) {
                return expected(c, line, field, text);
            }
            column.mark_not_null();
            column.u8.push_back(*value ? 1 : 0);
            column.sketch.add(detail::hash_word(*value ? 1U : 0U));
            return true;
        }
        case TypeId::integer:
        case TypeId::bigint: {
            const char *from = text.data();
            const char *to = from + text.size();
            if (from != to && *from == '+') {
                ++from;
            }
            std::int64_t value = 0;
            const auto [ptr, ec] = std::from_chars(from, to, value);
            if (from == to || ptr != to || (ec != std::errc{} && ec != std::errc::result_out_of_range)) {
                return expected(c, line, field, text);
            }
            if (ec == std::errc::result_out_of_range ||
                (type.id == TypeId::integer && (value < std::numeric_limits<std::int32_t>::min() ||
                                                value > std::numeric_limits<std::int32_t>::max()))) {
                return out_of_range(c, line, field, text);
            }
            column.mark_not_null();
            column.i64.push_back(value);
            column.sketch.add(detail::hash_word(static_cast<std::uint64_t>(value)));
            return true;
        }
        case TypeId::decimal: {
            const auto value = decimal::parse(text, type.precision, type.scale);
            if (!value) {
                return is_decimal_syntax(text) ? out_of_range(c, line, field, text)
                                               : expected(c, line, field, text);
            }
            column.mark_not_null();
            if (type.physical() == PhysicalType::i128) {
                column.i128.push_back(*value);
                column.sketch.add(
                    detail::hash_word(static_cast<std::uint64_t>(*value) ^
                                      detail::hash_word(static_cast<std::uint64_t>(*value >> 64))));
            } else {
                column.i64.push_back(static_cast<std::int64_t>(*value));
                column.sketch.add(detail::hash_word(static_cast<std::uint64_t>(*value)));
            }
            return true;
        }
        case TypeId::float64: {
            const char *from = text.data();
            const char *to = from + text.size();
            if (from != to && *from == '+') {
                ++from;
            }
            double value = 0.0;
            const auto [ptr, ec] = std::from_chars(from, to, value);
            if (from == to || ptr != to || ec != std::errc{}) {
                return ec == std::errc::result_out_of_range && ptr == to ? out_of_range(c, line, field, text)
                                                                         : expected(c, line, field, text);
            }
            column.mark_not_null();
            column.f64.push_back(value);
            const double normalized = value == 0.0 ? 0.0 : value;
            std::uint64_t bits = 0;
            std::memcpy(&bits, &normalized, sizeof(bits));
            column.sketch.add(detail::hash_word(bits));
            return true;
        }
        case TypeId::date: {
            const auto value = date::parse(text);
            if (!value) {
                return expected(c, line, field, text);
            }
            column.mark_not_null();
            column.i64.push_back(*value);
            column.sketch.add(detail::hash_word(static_cast<std::uint64_t>(*value)));
            return true;
        }
        case TypeId::varchar:
            if (const std::size_t bad = invalid_utf8_at(text); bad != std::string_view::npos) {
                // The raw bytes are not shown: they would make the message invalid UTF-8 too.
                char byte[8];
                std::snprintf(byte, sizeof(byte), "0x%02X",
                              static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
                return type_error(c, line, field,
                                  std::string("invalid UTF-8 in a VARCHAR value (byte ")
                                      .append(byte)
                                      .append(" at byte ")
                                      .append(std::to_string(bad + 1))
                                      .append(" of the field)"));
            }
            if (type.length != 0 && text.size() > type.length) {
                const std::size_t characters = detail::utf8_length(text);
                if (characters > type.length) {
                    return type_error(c, line, field,
                                      std::string("value ")
                                          .append(quoted_excerpt(text))
                                          .append(" too long for ")
                                          .append(type.to_string())
                                          .append(" (")
                                          .append(std::to_string(characters))
                                          .append(" characters)"));
                }
            }
            column.mark_not_null();
            _state.build->stage_string(column, c, content);
            return true;
        }
        return expected(c, line, field, text);
    }

    LoadState &_state;
    std::size_t _index;
    std::unique_ptr<detail::StagedChunk> _owned{};
    detail::StagedChunk *_chunk{nullptr};
    bool _complete{false}; // every line parsed
    std::size_t _columns{0};
    std::uint64_t _line{0};
    const char *_line_begin{nullptr};
};

/// Starts the parse tasks the stream asks for and gives back the pages of parsed chunks.
class ParseFeed final : public detail::ChunkFeed {
public:
    explicit ParseFeed(LoadState &state) noexcept : _state(state) {}

    void start(std::size_t index) noexcept override {
        LoadState *shared = &_state;
        _state.group->spawn([shared, index]() noexcept { ChunkParser(*shared, index).run(); });
    }

    void released(std::size_t index) noexcept override {
        // Its values are in fragments now (dictionary values are copied by the stream); an error
        // message that quotes the line reads it from the file again.
        const auto [begin, end] = _state.ranges[index];
        _state.mapping->release(begin, end);
    }

private:
    LoadState &_state;
};

std::string validate(const CsvOptions &options, char delimiter) {
    if (delimiter == '\n' || delimiter == '\r') {
        return "the delimiter cannot be a line break";
    }
    if (options.quote && (*options.quote == delimiter || *options.quote == '\n' || *options.quote == '\r')) {
        return "the quote character must differ from the delimiter and from line breaks";
    }
    if (options.chunk_bytes == 0) {
        return "chunk_bytes must be positive";
    }
    if (options.null_string.find(delimiter) != std::string::npos ||
        options.null_string.find('\n') != std::string::npos) {
        return "the NULL string cannot contain the delimiter or a line break";
    }
    return {};
}

} // namespace

LoadResult load_into(tasking::Runtime &runtime, const std::shared_ptr<const Table> &base,
                     const std::string &path, const CsvOptions &options) {
    MX_ASSERT(!runtime.on_worker(),
              "load blocks until its tasks finish: call it from outside the runtime's workers");
    MX_ASSERT(base != nullptr, "load_into needs a table");
    const auto start = std::chrono::steady_clock::now();
    LoadResult result;
    const char delimiter = options.delimiter.value_or(default_delimiter(path));
    if (std::string problem = validate(options, delimiter); !problem.empty()) {
        result.error = std::string("cannot load ").append(path).append(": ").append(problem);
        return result;
    }
    MappedFile file;
    if (std::string problem = file.open(path); !problem.empty()) {
        result.error = std::move(problem);
        return result;
    }

    detail::TableBuild build(base);
    LoadState state;
    state.options = &options;
    state.delimiter = delimiter;
    state.mapping = &file;
    state.file = file.data();
    state.build = &build;
    for (std::size_t begin = 0; begin < file.size();) {
        std::size_t end = std::min(file.size(), begin + options.chunk_bytes);
        if (end < file.size()) {
            const void *newline = std::memchr(file.data() + end - 1, '\n', file.size() - (end - 1));
            end = newline == nullptr
                      ? file.size()
                      : static_cast<std::size_t>(static_cast<const char *>(newline) - file.data()) + 1;
        }
        state.ranges.emplace_back(begin, end);
        begin = end;
    }
    const std::size_t chunks = state.ranges.size();
    state.lines.assign(chunks, 0);
    state.errors.resize(chunks);

    ProgressBar progress(path, file.size(), options.progress == ProgressMode::automatic);
    state.progress = &progress;
    // The group outlives the stream, whose tasks run in it.
    tasking::TaskGroup group{runtime};
    detail::FragmentStream stream(build, &group);
    state.group = &group;
    state.stream = &stream;
    ParseFeed feed(state);
    if (chunks > 0) {
        const std::size_t window =
            options.staged_chunks != 0 ? options.staged_chunks : std::size_t{4} * runtime.worker_count();
        // Parse errors are reported per chunk (first_error), not through the group: every
        // chunk before the first error must finish to number its line. The extra count keeps
        // the round open while the first tasks start.
        group.add();
        stream.start_feed(feed, chunks, window);
        group.done();
        const tasking::GroupResult outcome = group.wait();
        if (outcome.cancelled && !outcome.failed) {
            // Only a stop of the runtime cancels this group: chunks were dropped unparsed.
            progress.finish();
            result.error = std::string("cannot load ").append(path).append(": the runtime stopped");
            return result;
        }
        if (outcome.failed) {
            progress.finish();
            result.error = std::string("cannot load ").append(path).append(": out of memory");
            return result;
        }
    }

    // The first error in file order: every chunk before it parsed completely, so its line number
    // is the lines of those chunks plus its line within its own chunk.
    for (std::size_t i = 0; i < chunks; ++i) {
        if (state.errors[i] == nullptr) {
            continue;
        }
        const ChunkError &error = *state.errors[i];
        std::uint64_t line = error.line;
        for (std::size_t j = 0; j < i; ++j) {
            line += state.lines[j];
        }
        const std::string_view prefix(file.data() + error.line_offset, error.position);
        const std::size_t column = detail::utf8_length(prefix) + 1;
        progress.finish();
        result.error = path;
        result.error.append(":")
            .append(std::to_string(line))
            .append(":")
            .append(std::to_string(column))
            .append(": ")
            .append(error.message);
        return result;
    }

    try {
        result.table = stream.finish();
    } catch (const std::bad_alloc &) {
        progress.finish();
        result.error = std::string("cannot load ").append(path).append(": out of memory");
        return result;
    }
    progress.finish();
    result.rows = stream.rows();
    result.peak_staged_chunks = stream.peak_chunks();
    result.bytes = file.size();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

LoadResult load(tasking::Runtime &runtime, Catalog &catalog, std::string_view table, const std::string &path,
                const CsvOptions &options) {
    std::shared_ptr<const Table> base = catalog.find(table);
    if (base == nullptr) {
        LoadResult result;
        result.error = std::string("cannot load ")
                           .append(path)
                           .append(": table ")
                           .append(table)
                           .append(" does not exist");
        return result;
    }
    LoadResult result = load_into(runtime, base, path, options);
    if (result.ok() && !catalog.replace(base, result.table)) {
        result = LoadResult{};
        result.error =
            std::string("cannot load ")
                .append(path)
                .append(": table ")
                .append(table)
                .append(" was changed or dropped by another statement during the load; nothing was "
                        "loaded");
    }
    return result;
}

} // namespace mx::db
