"""``record``: ``dataclasses.dataclass`` whose generated methods are compiled at first use.

``dataclass`` compiles each method it generates (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``) from source text when the class is declared; with some 70 records declared by
what a broker's start imports, that was about a third of the import's instructions (docs/
performance.md, "The fixture and start-up, round four").  ``record`` declares the class with
``dataclass`` minus those methods (fields, slots, frozen-ness, ``__match_args__``: everything
``dataclasses.fields``, ``replace`` and ``asdict`` read) and puts a stand-in in each method's
place; the first call of a stand-in has ``dataclass`` generate that method for a twin class with
the same fields, installs it on the record and calls it.  From then on the method is
``dataclass``'s own, called directly: instances and their speed are those of a dataclass.

A frozen record's ``__setattr__`` and ``__delattr__`` (which ``dataclass`` also compiles at
declaration, for the record and again for each twin) are stand-ins as well, made by ``dataclass``'s
own maker at their first call, which for a frozen record is an attempt to assign (an error).

Only the common options are deferred; ``order``, ``unsafe_hash`` or ``InitVar`` fields take the
plain ``dataclass``.  Two threads calling a stand-in at once each generate an equal method;
the last one stays.
"""

from __future__ import annotations

import dataclasses
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
        annotations = cls.__dict__.get("__annotations__", {})
        if order or any("InitVar" in str(kind) for kind in annotations.values()):
            return dataclasses.dataclass(cls, eq=eq, frozen=frozen, slots=slots, kw_only=kw_only, order=order)
        own = set(cls.__dict__)  # methods the class defines itself, which dataclass leaves alone
        own_hash = "__hash__" in own and not (cls.__dict__["__hash__"] is None and "__eq__" in own)
        made: Any = _dataclass(cls, init=False, repr=False, eq=False, frozen=frozen, slots=slots, kw_only=kw_only)
        if "__init__" not in own:
            made.__init__ = _stand_in(made, "__init__", frozen, {"init": True})
        if "__repr__" not in own:
            made.__repr__ = _stand_in(made, "__repr__", frozen, {"repr": True})
        if eq and "__eq__" not in own:
            made.__eq__ = _stand_in(made, "__eq__", frozen, {"eq": True})
            if not own_hash:  # dataclass's rule: equal records hash alike only when frozen
                made.__hash__ = _stand_in(made, "__hash__", frozen, {"eq": True}) if frozen else None
        return made  # type: ignore[no-any-return]

    return wrap if cls is None else wrap(cls)


#: ``dataclass``'s maker of a frozen class's ``__setattr__`` and ``__delattr__`` (compiled from
#: source at declaration, two ``compile`` calls a frozen record); deferred like the other methods
#: where it has the form Python 3.11 and 3.12 give it, else left alone.
_FROZEN_METHODS: Any = getattr(dataclasses, "_frozen_get_del_attr", None)
_DEFER_FROZEN = _FROZEN_METHODS is not None and _FROZEN_METHODS.__code__.co_varnames[:3] == ("cls", "fields", "globals")


def _dataclass(cls: type[T], *, frozen: bool, **options: bool) -> type[T]:
    """``dataclass(cls, frozen=frozen, **options)``, a frozen class's ``__setattr__`` and
    ``__delattr__`` stand-ins (a twin's are never called: its methods move to the record)."""
    if not (frozen and _DEFER_FROZEN):
        return dataclasses.dataclass(cls, frozen=frozen, **options)
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


def _stand_in(made: Any, name: str, frozen: bool, methods: dict[str, bool]) -> Callable[..., Any]:
    """A method that makes ``made``'s real ``name`` (``dataclass``'s), installs it and calls it."""

    def stand_in(self: Any, *args: Any, **kwargs: Any) -> Any:
        method = getattr(_twin(made, frozen, methods), name)
        setattr(made, name, method)
        return method(self, *args, **kwargs)

    stand_in.__name__, stand_in.__qualname__ = name, f"{made.__qualname__}.{name}"
    return stand_in


def _twin(made: Any, frozen: bool, methods: dict[str, bool]) -> type:
    """A class with ``made``'s fields (inherited ones too, in order) and the methods asked for."""
    # A docstring, or dataclass would make one from inspect.signature (it tokenizes text signatures).
    namespace: dict[str, Any] = {"__annotations__": {}, "__qualname__": made.__qualname__, "__doc__": made.__doc__}
    if hasattr(made, "__post_init__"):
        namespace["__post_init__"] = made.__post_init__  # so the generated __init__ calls it
    for f in dataclasses.fields(made):
        namespace["__annotations__"][f.name] = f.type
        namespace[f.name] = dataclasses.field(
            default=f.default, default_factory=f.default_factory, init=f.init, repr=f.repr, hash=f.hash,
            compare=f.compare, kw_only=f.kw_only,
        )  # fmt: skip
    options = {"init": False, "repr": False, "eq": False, **methods}
    return _dataclass(type(made.__name__, (), namespace), frozen=frozen, **options)
