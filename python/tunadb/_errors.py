"""PEP 249 exception classes and the mapping of engine errors onto them."""


class Warning(Exception):  # noqa: A001 - the name PEP 249 prescribes
    """Important warnings (not raised by TunaDB at present)."""


class Error(Exception):
    """Base class of every TunaDB error.

    For errors of a statement, `message` is the engine's message, `position` the 1-based character
    in the SQL text where it was found (0 when the error concerns no particular place, as for
    runtime errors of a query), `line` and `column` the same place (0 without one). str() is what
    the tunadb shell prints after "tunadb: ": "line L, column C: message" or the message alone.
    """

    def __init__(self, message, position=0, line=0, column=0):
        self.message = message
        self.position = position
        self.line = line
        self.column = column
        text = f"line {line}, column {column}: {message}" if line > 0 else message
        super().__init__(text)


class InterfaceError(Error):
    """Misuse of the interface itself (not of the database)."""


class DatabaseError(Error):
    """Errors of the database."""


class DataError(DatabaseError):
    """Bad data: an overflow, a division by zero, a failed CAST, a malformed input file."""


class OperationalError(DatabaseError):
    """The database could not do its work: a missing file, a cancelled query, out of memory."""


class IntegrityError(DatabaseError):
    """Relational integrity (TunaDB enforces no constraints and does not raise it)."""


class InternalError(DatabaseError):
    """The engine failed in a way that is a bug."""


class ProgrammingError(DatabaseError):
    """SQL errors (syntax, unknown names, types), wrong parameters, use of a closed object."""


class NotSupportedError(DatabaseError):
    """SQL or API the engine does not support."""


# Messages of bad values, wherever they are found (a constant folded at bind time has a position).
_DATA_MARKERS = ("overflow", "division by zero", "out of range", "could not convert", "cannot convert")


def _is_load_error(message):
    # The loader reports "file:line:column: ..." for bad content and "cannot open ..." for files.
    return message.startswith("COPY") or ".tbl:" in message or ".csv:" in message


def translate(engine_error, sql_is_copy=False):
    """The PEP 249 exception for an engine error (message, position, line, column)."""
    message, position, line, column = engine_error.args
    lower = message.lower()
    if lower.startswith("internal error"):
        cls = InternalError
    elif lower in ("interrupted", "cancelled", "connection closed") or "out of memory" in lower:
        cls = OperationalError
    elif "not supported" in lower or "is not supported" in lower:
        cls = NotSupportedError
    elif any(marker in lower for marker in _DATA_MARKERS):
        cls = DataError
    elif sql_is_copy or _is_load_error(message):
        if "no such file" in lower or "cannot open" in lower or "permission denied" in lower \
                or "is a directory" in lower or "cannot read" in lower:
            cls = OperationalError
        elif "does not exist" in lower and "table" in lower:
            cls = ProgrammingError
        else:
            cls = DataError
    elif position == 0:
        # Errors without a place in the text are runtime errors of a query (overflow, CAST).
        cls = DataError
    else:
        cls = ProgrammingError
    return cls(message, position, line, column)
