"""`IdentityWeakMap`: a dictionary keyed by object identity that forgets an entry when its key
is garbage-collected. (`weakref.WeakKeyDictionary` compares keys with `==`, which on a Tensor
is elementwise.)"""

import weakref


class IdentityWeakMap:
    """obj -> value, by identity; an entry goes with its object."""

    def __init__(self):
        self._items = {}

    def __setitem__(self, obj, value):
        key = id(obj)
        items = self._items
        entry = items.get(key)
        if entry is not None and entry[0]() is obj:      # a new value for a known key: no new ref
            items[key] = (entry[0], value)
            return
        items[key] = (weakref.ref(obj, lambda _, key=key: items.pop(key, None)), value)

    def get(self, obj, default=None):
        entry = self._items.get(id(obj))
        return entry[1] if entry is not None and entry[0]() is obj else default

    def __contains__(self, obj):
        entry = self._items.get(id(obj))
        return entry is not None and entry[0]() is obj

    def pop(self, obj, default=None):
        entry = self._items.get(id(obj))
        if entry is None or entry[0]() is not obj:
            return default
        del self._items[id(obj)]
        return entry[1]

    def __bool__(self):
        return bool(self._items)

    def __len__(self):
        return len(self._items)

    def nodes(self):
        """The live keys."""
        return {ref() for ref, _ in list(self._items.values())} - {None}

    def values(self):
        return [value for ref, value in list(self._items.values()) if ref() is not None]
