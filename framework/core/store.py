"""Measurements that plugins share: typed keys, each with one declared producer.

A plugin that measures something others use declares the key in ``provides`` and puts the value
with ``state.store.put(KEY, value, by=self)``; a plugin that uses it declares the key in ``needs``
(its callbacks then run after the producer's at every event) and reads ``state.store.get(KEY)``,
which is None until the producer has put a value, and stays None when the producer is off. No
plugin reads another plugin's options or attributes: what one learns, another reads here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Key(Generic[T]):
    """The name and meaning of one shared measurement (``T`` is the type of its value)."""

    name: str
    doc: str

    def __repr__(self) -> str:
        return f"Key({self.name!r})"


class Store:
    """The shared measurements of a run; only a key's declared producer may put it."""

    def __init__(self) -> None:
        self._values: dict[Key, Any] = {}
        self._producers: dict[Key, str] = {}

    def declare(self, key: Key, producer: str) -> None:
        """Record that plugin ``producer`` provides ``key`` (at most one producer per key)."""
        other = self._producers.setdefault(key, producer)
        if other != producer:
            raise TypeError(f"{key!r} is provided by two plugins, {other} and {producer}: one key, one producer.")

    def producer(self, key: Key) -> str | None:
        """The plugin that provides ``key`` in this run (None: nobody does, e.g. the producer is off)."""
        return self._producers.get(key)

    def put(self, key: Key[T], value: T, *, by: Any) -> None:
        """Set ``key``; ``by`` is the producing plugin, which must have declared ``key`` in ``provides``."""
        name = getattr(by, "name", type(by).__name__)
        if self._producers.get(key) != name:
            raise TypeError(f"{name} puts {key!r} without declaring it: add it to {name}.provides.")
        self._values[key] = value

    def get(self, key: Key[T], default: T | None = None) -> T | None:
        """The value of ``key``, or ``default`` while nobody has put one."""
        return self._values.get(key, default)

    def explain(self) -> list[str]:
        """One line per declared key: who provides it."""
        return [f"{key.name}: provided by {producer} ({key.doc})" for key, producer in self._producers.items()]
