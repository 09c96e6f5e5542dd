"""Binding of `?` and `$n` parameters: each placeholder outside strings, quoted identifiers and
comments becomes an SQL literal of the parameter's type (strings quoted with doubled quotes,
never formatted into the text unescaped)."""

import datetime
import decimal
import math
import numbers

from ._errors import DataError, NotSupportedError, ProgrammingError


def scan_placeholders(sql):
    """[(start, end, index)] of the placeholders in `sql`: index None for `?`, n-1 for `$n`."""
    found = []
    i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            # E'...' strings take backslash escapes; standard strings only doubled quotes.
            escapes = i > 0 and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            i += 1
            while i < n:
                if escapes and sql[i] == "\\":
                    i += 2
                    continue
                if sql[i] == "'":
                    if i + 1 < n and sql[i + 1] == "'":
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c == '"':
            i += 1
            while i < n:
                if sql[i] == '"':
                    if i + 1 < n and sql[i + 1] == '"':
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == "/" and sql.startswith("/*", i):
            depth = 1
            i += 2
            while i < n and depth > 0:
                if sql.startswith("/*", i):
                    depth += 1
                    i += 2
                elif sql.startswith("*/", i):
                    depth -= 1
                    i += 2
                else:
                    i += 1
        elif c == "?":
            found.append((i, i + 1, None))
            i += 1
        elif c == "$":
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            if j > i + 1 and not (i > 0 and (sql[i - 1].isalnum() or sql[i - 1] == "_")):
                found.append((i, j, int(sql[i + 1:j]) - 1))
                i = j
                continue
            # A dollar-quoted string: $tag$ ... $tag$.
            k = i + 1
            while k < n and (sql[k].isalnum() or sql[k] == "_"):
                k += 1
            if k < n and sql[k] == "$" and not sql[i + 1:k][:1].isdigit():
                tag = sql[i:k + 1]
                end = sql.find(tag, k + 1)
                i = n if end < 0 else end + len(tag)
            else:
                i += 1
        else:
            i += 1
    return found


def literal(value):
    """`value` as an SQL literal of TunaDB."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # NumPy scalars: the Python value (datetime64[D] -> date)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, numbers.Integral):
        number = int(value)
        return str(number) if number >= 0 else f"({number})"
    if isinstance(value, float) or isinstance(value, numbers.Real) and not isinstance(value, decimal.Decimal):
        number = float(value)
        if not math.isfinite(number):
            raise NotSupportedError(f"parameter {number!r}: DOUBLE infinities and NaN are not supported")
        text = repr(number)
        if "e" not in text:
            text += "e0"  # an exponent makes the literal DOUBLE (a plain 1.5 is DECIMAL)
        return text if number >= 0 and not text.startswith("-") else f"({text})"
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise DataError(f"parameter {value}: DECIMAL has no infinities or NaN")
        sign, digits, exponent = value.as_tuple()
        scale = max(0, -exponent)
        text = format(value, "f")
        precision = max(len(digits) + max(0, exponent), scale, 1)
        if precision > 38:
            raise DataError(f"parameter {value}: more than 38 digits")
        if scale == 0:
            return f"CAST('{text}' AS DECIMAL({precision},0))"
        return text if not sign else f"({text})"
    if isinstance(value, str):
        if "\x00" in value:
            raise DataError("parameter strings cannot contain NUL characters")
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime.datetime):
        raise NotSupportedError("TIMESTAMP parameters are not supported (TunaDB has DATE only)")
    if isinstance(value, datetime.date):
        return f"DATE '{value.year:04d}-{value.month:02d}-{value.day:02d}'"
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise NotSupportedError("binary parameters are not supported")
    raise NotSupportedError(f"parameters of type {type(value).__name__} are not supported")


class Bound:
    """SQL text with its parameters substituted, and the map from its positions back to the
    caller's text (so that error positions point into what the caller wrote)."""

    def __init__(self, original, text, pieces):
        self.original = original
        self.text = text
        self._pieces = pieces  # [(new_start, new_end, old_start, old_end)], ascending

    def original_position(self, position):
        """1-based character position in the bound text -> the same place in the original."""
        if position <= 0:
            return 0
        at = position - 1
        shift = 0
        for new_start, new_end, old_start, old_end in self._pieces:
            if at < new_start:
                break
            if at < new_end:
                return old_start + 1
            shift = new_end - old_end
        return at - shift + 1


def line_column(text, position):
    """(line, column), 1-based, of the 1-based character `position` in `text`."""
    before = text[:position - 1]
    line = before.count("\n") + 1
    column = position - (before.rfind("\n") + 1)
    return line, column


def bind(sql, parameters, placeholders=None):
    """Substitutes `parameters` (a sequence) for the placeholders of `sql`."""
    if isinstance(parameters, (str, bytes)) or isinstance(parameters, dict) \
            or not hasattr(parameters, "__getitem__") or not hasattr(parameters, "__len__"):
        raise ProgrammingError("parameters must be a sequence (a tuple or list) for ? and $n placeholders")
    if placeholders is None:
        placeholders = scan_placeholders(sql)
    kinds = {index is None for _, _, index in placeholders}
    if len(kinds) > 1:
        raise ProgrammingError("cannot mix ? and $n placeholders in one statement")
    if kinds == {True}:
        if len(placeholders) != len(parameters):
            raise ProgrammingError(
                f"the statement has {len(placeholders)} ? placeholders but {len(parameters)} parameters were given")
        indices = range(len(placeholders))
    elif kinds == {False}:
        indices = [index for _, _, index in placeholders]
        wanted = max(indices) + 1
        if min(indices) < 0:
            raise ProgrammingError("placeholders count from $1")
        if wanted != len(parameters):
            raise ProgrammingError(f"the statement uses ${wanted} but {len(parameters)} parameters were given")
    else:
        if len(parameters) != 0:
            raise ProgrammingError(f"the statement has no placeholders but {len(parameters)} parameters were given")
        return Bound(sql, sql, [])
    literals = [literal(parameters[i]) for i in range(len(parameters))]
    out = []
    pieces = []
    last = 0
    length = 0
    for (start, end, _), index in zip(placeholders, indices):
        out.append(sql[last:start])
        length += start - last
        text = literals[index]
        pieces.append((length, length + len(text), start, end))
        out.append(text)
        length += len(text)
        last = end
    out.append(sql[last:])
    return Bound(sql, "".join(out), pieces)
