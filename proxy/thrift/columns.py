"""A result held column by column, each value already as its TColumn member carries it. No I/O.

A served answer (proxy/serving/columnar.py) is fetched from DuckDB a column at a time and
kept in this form, in the result cache too: a FetchResults batch is then a slice of each
column's list and of its NULL flags (proxy/thrift/rowsets.py), never a value-by-value
conversion. Iterated, it gives row tuples of those values (None for NULL), as a client
would read them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, overload

# one byte per row, 1 where NULL -> the bits of a TColumn's nulls ("0"/"1" text, reversed)
_BITS = bytes.maketrans(b"\x00\x01", b"01")


@dataclass(frozen=True)
class Column:
    """`values`: each row's value as the member holds it (str, int, float or bool), the
    type's default in a NULL slot; `nulls`: one byte per row, 1 where NULL (None: none)."""
    values: list
    nulls: bytes | None = None

    def bitmap(self, start: int, count: int) -> bytes:
        """The nulls of rows [start, start + count) as TColumn sends them: bit (i mod 8) of
        byte i//8, LSB first, set = NULL."""
        size = (count + 7) // 8
        flags = self.nulls[start:start + count] if self.nulls is not None else b""
        if b"\x01" not in flags:
            return bytes(size)
        # bit i of the little-endian integer is row i: the flags reversed, read in base 2
        return int(flags[::-1].translate(_BITS), 2).to_bytes(size, "little")

    def is_null(self, i: int) -> bool:
        return self.nulls is not None and self.nulls[i] == 1

    def size(self) -> int:
        """About the bytes it holds: the list, its values and the flags."""
        n = len(self.values)
        size = 56 + 8 * n + (33 + n if self.nulls is not None else 0)
        if not n:
            return size
        first = self.values[0]
        if isinstance(first, str):
            return size + 49 * n + sum(map(len, self.values))
        if isinstance(first, bool):         # True and False are shared
            return size
        return size + (24 if isinstance(first, float) else 28) * n


class ColumnarRows(Sequence):
    """The rows of a result as Columns of equal length."""
    __slots__ = ("columns", "count", "bytes")

    def __init__(self, columns: Sequence[Column]):
        self.columns = tuple(columns)
        counts = {len(c.values) for c in self.columns}
        for c in self.columns:
            if c.nulls is not None:
                counts.add(len(c.nulls))
        if len(counts) > 1:
            raise ValueError(f"columns of different lengths {sorted(counts)}")
        self.count = counts.pop() if counts else 0
        self.bytes = 64 + sum(c.size() for c in self.columns)

    def __len__(self) -> int:
        return self.count

    def _row(self, i: int) -> tuple[Any, ...]:
        return tuple(None if c.is_null(i) else c.values[i] for c in self.columns)

    @overload
    def __getitem__(self, i: int) -> tuple[Any, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[Any, ...]]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(self.count))]
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError("row index out of range")
        return self._row(i)

    def __eq__(self, other: object) -> bool:
        """Equal to the same rows as a list, a tuple or another ColumnarRows."""
        if not isinstance(other, (list, tuple, ColumnarRows)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None     # type: ignore[assignment] - mutable-looking, like a list

    def __repr__(self) -> str:
        return f"ColumnarRows({self.count} rows x {len(self.columns)} columns)"
