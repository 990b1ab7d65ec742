"""Client handle <-> proxy object registry.

The proxy mints every handle a client sees (16-byte random guid + 16-byte random secret)
and maps it to its own session/operation object, which in turn holds the upstream handle
(if any). Local-only operations and upstream reconnects are therefore invisible to clients.
Lookups are by guid (never by seqid: PyHive and impyla send seqid=0 on every call) and the
secret must match.
"""
from __future__ import annotations

import secrets
from typing import Generic, Iterator, TypeVar

from proxy.errors import InvalidHandle
from proxy.thrift.gen.TCLIService.ttypes import THandleIdentifier

T = TypeVar("T")


def mint() -> THandleIdentifier:
    return THandleIdentifier(guid=secrets.token_bytes(16), secret=secrets.token_bytes(16))


def hex_id(ident: THandleIdentifier | None) -> str:
    if ident is None or not isinstance(ident.guid, (bytes, bytearray)):
        return "-"
    return bytes(ident.guid).hex()


class HandleRegistry(Generic[T]):
    """guid -> (secret, object). `kind` names the handle in errors
    ("SessionHandle" / "OperationHandle")."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[bytes, tuple[bytes, T]] = {}

    def add(self, obj: T, ident: THandleIdentifier | None = None) -> THandleIdentifier:
        ident = ident or mint()
        self._items[bytes(ident.guid)] = (bytes(ident.secret), obj)
        return ident

    def get(self, ident: THandleIdentifier | None) -> T:
        item = self._lookup(ident)
        if item is None:
            raise InvalidHandle(self.kind, hex_id(ident))
        return item

    def find(self, ident: THandleIdentifier | None) -> T | None:
        return self._lookup(ident)

    def _lookup(self, ident: THandleIdentifier | None) -> T | None:
        if ident is None or not isinstance(ident.guid, (bytes, bytearray)):
            return None
        entry = self._items.get(bytes(ident.guid))
        if entry is None or entry[0] != bytes(ident.secret or b""):
            return None
        return entry[1]

    def remove(self, ident: THandleIdentifier | None) -> T | None:
        obj = self._lookup(ident)
        if obj is not None:
            del self._items[bytes(ident.guid)]
        return obj

    def __len__(self) -> int:
        return len(self._items)

    def values(self) -> Iterator[T]:
        return iter([v for _, v in self._items.values()])
