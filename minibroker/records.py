"""``record``: ``dataclasses.dataclass`` whose generated methods are compiled at first use.

``dataclass`` compiles each method it generates (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``) from source text when the class is declared; with some 70 records declared by
what a broker's start imports, that was about a third of the import's instructions (docs/
performance.md, "The fixture and start-up, round four").  ``record`` declares the class without
those methods (fields, slots, frozen-ness, ``__match_args__``: everything ``dataclasses.fields``,
``replace`` and ``asdict`` read) and puts a stand-in in each method's place; the first call of a
stand-in has ``dataclass``'s own maker of that method make it, with the arguments ``dataclass``
gives it, installs it on the record and calls it.  From then on the method is ``dataclass``'s
own, called directly: instances and their speed are those of a dataclass.  A frozen record's
``__setattr__`` and ``__delattr__`` are stand-ins as well, made at their first call, which for a
frozen record is an attempt to assign (an error).

Where ``dataclass``'s makers have another form than in Python 3.11 and 3.12, and for
``order``, ``record`` is plain ``dataclass``.  Two threads calling a stand-in at once
each make an equal method; the last one stays.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["record"]

T = TypeVar("T")


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(
    *, eq: bool = True, frozen: bool = False, slots: bool = False, kw_only: bool = False, order: bool = False
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(
    cls: type[T] | None = None,
    /,
    *,
    eq: bool = True,
    frozen: bool = False,
    slots: bool = False,
    kw_only: bool = False,
    order: bool = False,
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@record`` / ``@record(frozen=True, slots=True)``: as ``@dataclass`` with the same options."""

    def wrap(cls: type[T]) -> type[T]:
        if order or not _DEFER:
            return dataclasses.dataclass(cls, eq=eq, frozen=frozen, slots=slots, kw_only=kw_only, order=order)
        own = set(cls.__dict__)  # methods the class defines itself, which dataclass leaves alone
        own_hash = "__hash__" in own and not (cls.__dict__["__hash__"] is None and "__eq__" in own)
        made: Any = _dataclass(cls, init=False, repr=False, eq=False, frozen=frozen, slots=slots, kw_only=kw_only)
        if "__init__" not in own:
            made.__init__ = _stand_in(made, "__init__", frozen, slots)
        if "__repr__" not in own:
            made.__repr__ = _stand_in(made, "__repr__", frozen, slots)
        if eq and "__eq__" not in own:
            made.__eq__ = _stand_in(made, "__eq__", frozen, slots)
            if not own_hash:  # dataclass's rule: equal records hash alike only when frozen
                made.__hash__ = _stand_in(made, "__hash__", frozen, slots) if frozen else None
        return made  # type: ignore[no-any-return]

    return wrap if cls is None else wrap(cls)


#: ``dataclass``'s makers of the methods it generates, with the arguments ``_generated`` and
#: ``_frozen_stand_ins`` give them: their form in Python 3.11 and 3.12.  Where they have another
#: (3.13), ``record`` is ``dataclass``.
_MAKERS = {
    "_init_fn": ("fields", "std_fields", "kw_only_fields", "frozen", "has_post_init", "self_name", "globals", "slots"),
    "_repr_fn": ("fields", "globals"),
    "_cmp_fn": ("name", "op", "self_tuple", "other_tuple", "globals"),
    "_hash_fn": ("fields", "globals"),
    "_frozen_get_del_attr": ("cls", "fields", "globals"),
}
_DEFER = all(
    (code := getattr(getattr(dataclasses, name, None), "__code__", None)) is not None
    and code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] == arguments
    for name, arguments in _MAKERS.items()
)
#: ``dataclass``'s maker of a frozen class's ``__setattr__`` and ``__delattr__``.
_FROZEN_METHODS: Any = getattr(dataclasses, "_frozen_get_del_attr", None)
_FIELD, _CLASSVAR = getattr(dataclasses, "_FIELD", None), getattr(dataclasses, "_FIELD_CLASSVAR", None)


#: A string annotation that may name one of ``dataclass``'s pseudo-field markers (``ClassVar``,
#: ``InitVar``, ``KW_ONLY``): only these are left for ``dataclass`` to parse.
_MARKER = re.compile(r"ClassVar|InitVar|KW_ONLY")


def _dataclass(cls: type[T], *, frozen: bool, **options: bool) -> type[T]:
    """``dataclass(cls, frozen=frozen, **options)``, a frozen class's ``__setattr__`` and
    ``__delattr__`` stand-ins, and its string annotations read once instead of three times.

    Under ``from __future__ import annotations`` every annotation is a string, which ``dataclass``
    parses for each field three times (is it ``ClassVar``, ``InitVar``, ``KW_ONLY``?: a regular
    expression and a module lookup each), about a fifth of declaring a record.  Annotations that
    cannot name a marker are shown to it as ``object`` for the call; each field's ``type`` and the
    class's ``__annotations__`` are the strings again afterwards.
    """
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})
    if annotations:
        cls.__annotations__ = {
            name: object if isinstance(kind, str) and _MARKER.search(kind) is None else kind
            for name, kind in annotations.items()
        }
    made = _frozen_dataclass(cls, **options) if frozen else dataclasses.dataclass(cls, **options)
    if annotations:
        made.__annotations__ = annotations  # (with slots, ``made`` is a new class with the masked copy)
        for item in made.__dataclass_fields__.values():  # type: ignore[attr-defined]
            if item.name in annotations:  # (a base's fields keep the base's own, already restored)
                item.type = annotations[item.name]
    return made


def _frozen_dataclass(cls: type[T], **options: bool) -> type[T]:
    """``dataclass(cls, frozen=True, **options)`` with the frozen class's ``__setattr__`` and
    ``__delattr__`` stand-ins."""
    # Swapped only for this call.  A plain dataclass declared meanwhile by another thread gets the
    # stand-ins too, which make for it exactly what dataclass would have made.
    dataclasses._frozen_get_del_attr = _frozen_stand_ins  # type: ignore[attr-defined]
    try:
        return dataclasses.dataclass(cls, frozen=True, **options)
    finally:
        dataclasses._frozen_get_del_attr = _FROZEN_METHODS  # type: ignore[attr-defined]


def _frozen_stand_ins(cls: type, fields: Any, globals: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """In place of ``dataclass``'s ``__setattr__`` and ``__delattr__``: the first call of either
    makes both with ``dataclass``'s own maker (same arguments), installs them and calls its own."""

    def real(self: Any, name: str) -> Callable[..., Any]:
        setattr_, delattr_ = _FROZEN_METHODS(cls, fields, globals)
        # The class that holds the stand-ins: with slots, the one dataclass made from ``cls``.
        owner = next(k for k in type(self).__mro__ if k.__dict__.get("__setattr__") is stand_ins[0])
        for method in (setattr_, delattr_):
            method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"  # (dataclass names them so)
        owner.__setattr__, owner.__delattr__ = setattr_, delattr_  # type: ignore[method-assign]
        return setattr_ if name == "__setattr__" else delattr_  # type: ignore[no-any-return]

    def __setattr__(self: Any, name: str, value: Any) -> None:
        real(self, "__setattr__")(self, name, value)

    def __delattr__(self: Any, name: str) -> None:
        real(self, "__delattr__")(self, name)

    stand_ins = (__setattr__, __delattr__)
    for method in stand_ins:
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    return stand_ins


def _stand_in(made: Any, name: str, frozen: bool, slots: bool) -> Callable[..., Any]:
    """A method that makes ``made``'s real ``name`` (``dataclass``'s), installs it and calls it."""

    def stand_in(self: Any, *args: Any, **kwargs: Any) -> Any:
        method = _generated(made, name, frozen, slots)
        setattr(made, name, method)
        return method(self, *args, **kwargs)

    stand_in.__name__, stand_in.__qualname__ = name, f"{made.__qualname__}.{name}"
    return stand_in


def _generated(made: Any, name: str, frozen: bool, slots: bool) -> Callable[..., Any]:
    """Record ``made``'s method ``name`` as ``dataclass`` makes it when it declares the class: by
    its own maker of that method, given what ``_process_class`` gives it."""
    fields = made.__dataclass_fields__
    module = sys.modules.get(made.__module__)
    globals = module.__dict__ if module is not None else {}
    plain = [f for f in fields.values() if f._field_type is _FIELD]
    method: Any
    if name == "__init__":  # InitVars (pseudo-fields) included
        taken = [f for f in fields.values() if f._field_type is not _CLASSVAR]
        positional, keywords = dataclasses._fields_in_init_order(taken)  # type: ignore[attr-defined]
        self_name = "__dataclass_self__" if "self" in fields else "self"
        post_init = hasattr(made, "__post_init__")
        method = dataclasses._init_fn(taken, positional, keywords, frozen, post_init, self_name, globals, slots)  # type: ignore[attr-defined]
    elif name == "__repr__":
        method = dataclasses._repr_fn([f for f in plain if f.repr], globals)  # type: ignore[attr-defined]
    elif name == "__eq__":
        compared = [f for f in plain if f.compare]
        mine, theirs = dataclasses._tuple_str("self", compared), dataclasses._tuple_str("other", compared)  # type: ignore[attr-defined]
        method = dataclasses._cmp_fn("__eq__", "==", mine, theirs, globals=globals)  # type: ignore[attr-defined]
    else:  # __hash__, of the fields compared unless a field says otherwise
        hashed = [f for f in plain if (f.compare if f.hash is None else f.hash)]
        method = dataclasses._hash_fn(hashed, globals)  # type: ignore[attr-defined]
    method.__qualname__ = f"{made.__qualname__}.{name}"
    return method  # type: ignore[no-any-return]
