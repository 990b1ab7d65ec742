"""ByteLRU: a least-recently-used map bounded by an approximate size in bytes.

Counting entries does not bound memory when a key is a statement's text: 2,048 entries of
1 MB statements are 2 GB. Every cache on the statement path is bounded by bytes instead,
and an entry larger than `max_entry` (a fraction of the budget) is not kept at all: one
huge statement must not flush every dashboard query out of the cache. Sizes are what the
caller says they are (text lengths are a fair proxy; exactness is not the point).

Thread-safe: statements are decided in worker threads as well as on the event loop.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, Iterator, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def text_size(*parts) -> int:
    """Approximate bytes of nested str/bytes/tuple/list/dict values: their lengths plus a
    flat per-object overhead (cheap on purpose; sys.getsizeof walks are not)."""
    total = 0
    stack = list(parts)
    while stack:
        p = stack.pop()
        total += 64
        if isinstance(p, (str, bytes)):
            total += len(p)
        elif isinstance(p, dict):
            stack.extend(p.keys())
            stack.extend(p.values())
        elif isinstance(p, (tuple, list, set, frozenset)):
            stack.extend(p)
    return total


class ByteLRU(Generic[K, V]):
    def __init__(self, max_bytes: int, size_of: Callable[[K, V], int],
                 max_entry: int | None = None):
        self.max_bytes = max(0, int(max_bytes))
        self.max_entry = self.max_bytes // 8 if max_entry is None else int(max_entry)
        self._size_of = size_of
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: K) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._data))

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value, _ = self._data[key]
            self._data.move_to_end(key)
            return value

    def get(self, key: K, default: V | None = None) -> V | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return default
            self._data.move_to_end(key)
            return hit[0]

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def put(self, key: K, value: V) -> bool:
        """Keep `value` unless it alone is over max_entry; evicts the least recently used
        entries until the total fits. Returns whether it was kept."""
        size = self._size_of(key, value)
        with self._lock:
            self._drop(key)
            if size > self.max_entry or size > self.max_bytes:
                return False
            self._data[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes and self._data:
                _, (_, old) = self._data.popitem(last=False)
                self.bytes -= old
            return True

    def pop(self, key: K, default: V | None = None) -> V | None:
        with self._lock:
            hit = self._data.get(key)
            self._drop(key)
            return default if hit is None else hit[0]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.bytes = 0

    def _drop(self, key: K) -> None:
        old = self._data.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
