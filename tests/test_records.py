"""``minibroker.records.record``: a dataclass whose methods are generated at their first call."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from dataclasses import InitVar, field
from typing import Any, ClassVar

import pytest

from minibroker import records
from minibroker.records import record


@record(frozen=True, slots=True)
class Point:
    """A frozen, slotted record (as most of the broker's are)."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


@record
class Box:
    """A mutable record with a factory default, a field left out of repr and compare, and a post-init."""

    items: list[int] = field(default_factory=list)
    note: str = field(default="", repr=False, compare=False)
    size: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.size = len(self.items)


@record(slots=True, eq=False)
class Handle:
    """Compared by identity."""

    name: str


@record(frozen=True, slots=True)
class Named:
    """Defines its own repr, which the record keeps."""

    name: str

    def __repr__(self) -> str:
        return f"<{self.name}>"


@record(frozen=True, slots=True)
class Child(Point):
    """Inherits the fields of ``Point`` and adds one, keyword-only."""

    label: str = field(default="c", kw_only=True)


def generated(cls: type, name: str) -> bool:
    """Whether ``cls.name`` is dataclass's generated method (not the record's stand-in)."""
    return bool(getattr(cls, name).__code__.co_name != "stand_in")


def test_nothing_is_generated_until_first_use() -> None:
    @record(frozen=True, slots=True)
    class Fresh:
        """Declared here, so no other test has used it."""

        a: int

    assert not any(generated(Fresh, name) for name in ("__init__", "__repr__", "__eq__", "__hash__"))
    first = Fresh(1)
    assert generated(Fresh, "__init__") and not generated(Fresh, "__repr__")
    assert repr(first) == "test_nothing_is_generated_until_first_use.<locals>.Fresh(a=1)"
    assert first == Fresh(1) and hash(first) == hash(Fresh(1))
    assert all(generated(Fresh, name) for name in ("__init__", "__repr__", "__eq__", "__hash__"))


def test_a_record_behaves_as_the_dataclass_it_declares() -> None:
    point = Point(1, tags=("a",))
    assert (point.x, point.y, point.tags) == (1, 0, ("a",))
    assert repr(point) == "Point(x=1, y=0, tags=('a',))"
    assert point == Point(1, 0, ("a",)) and point != Point(2) and point != (1, 0, ("a",))
    assert hash(point) == hash(Point(1, 0, ("a",)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    assert not hasattr(point, "__dict__")
    assert Point.__match_args__ == ("x", "y", "tags")
    assert [f.name for f in dataclasses.fields(Point)] == ["x", "y", "tags"]
    assert dataclasses.replace(point, y=5) == Point(1, 5, ("a",))
    assert dataclasses.asdict(point) == {"x": 1, "y": 0, "tags": ("a",)}
    assert copy.copy(point) == point and pickle.loads(pickle.dumps(point)) == point
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_defaults_post_init_and_field_options_are_kept() -> None:
    box, other = Box([1, 2], note="n"), Box()
    assert box.size == 2 and other.items == [] and other.items is not Box().items
    assert repr(box) == "Box(items=[1, 2], size=2)"
    assert box == Box([1, 2], note="different") and box != other
    assert Box.__hash__ is None  # mutable and compared by value: unhashable, as a dataclass
    box.items.append(3)
    box.size = 3


def test_identity_own_methods_and_inheritance() -> None:
    handle = Handle("h")
    assert handle != Handle("h") and handle == handle and hash(handle) == object.__hash__(handle)
    assert repr(Named("n")) == "<n>" and Named("n") == Named("n")
    child = Child(1, 2, label="x")
    assert (child.x, child.y, child.label) == (1, 2, "x")
    assert repr(child) == "Child(x=1, y=2, tags=(), label='x')"
    assert child != Point(1, 2) and child == Child(1, 2, label="x")
    with pytest.raises(TypeError):
        Child(1, 2, (), "x")  # type: ignore[misc]


@record(frozen=True)
class Keyed:
    """A field compared but left out of the hash."""

    key: str
    weight: list[int] = field(default_factory=list, hash=False)


def test_a_field_left_out_of_the_hash_stays_out() -> None:
    assert Keyed("k", [1]) == Keyed("k", [1]) and hash(Keyed("k", [1])) == hash(Keyed("k", [2]))


def test_frozen_setattr_and_delattr_are_made_at_first_use_as_dataclass_makes_them() -> None:
    @record(frozen=True, slots=True)
    class Slotted:
        """Declared here, so no other test has used it."""

        a: int

    @record(frozen=True)
    class Plain:
        """Frozen without slots: any attribute is refused, not only the fields."""

        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class SlottedReference:
        a: int

    @dataclasses.dataclass(frozen=True)
    class PlainReference:
        a: int

    def outcomes(instance: object) -> list[str]:
        seen = []
        for attempt in (lambda: setattr(instance, "a", 2), lambda: delattr(instance, "a"), lambda: setattr(instance, "b", 2)):
            with pytest.raises(Exception) as caught:  # noqa: PT011 (the type is what is compared)
                attempt()
            seen.append(type(caught.value).__name__)
        return seen

    for cls in (Slotted, Plain):
        assert cls.__setattr__.__code__.co_name == "__setattr__" and "stand_in" not in cls.__setattr__.__qualname__
        assert cls.__setattr__.__code__.co_filename == __import__("minibroker.records").records.__file__
    assert outcomes(Slotted(1)) == outcomes(SlottedReference(1)) == ["FrozenInstanceError", "FrozenInstanceError", "TypeError"]
    assert outcomes(Plain(1)) == outcomes(PlainReference(1)) == ["FrozenInstanceError"] * 3
    for cls in (Slotted, Plain):  # dataclass's own now, named as dataclass names them
        assert cls.__setattr__.__code__.co_filename != __import__("minibroker.records").records.__file__
        assert cls.__setattr__.__qualname__ == f"{cls.__qualname__}.__setattr__"
        assert cls.__delattr__.__qualname__ == f"{cls.__qualname__}.__delattr__"


# --------------------------------------------------------------------------- dataclass's makers


@dataclasses.dataclass(frozen=True)
class _FrozenBase:
    """A dataclass base with a ClassVar and an InitVar: pseudo-fields a record inherits."""

    base: int
    seen: ClassVar[int] = 0
    start: InitVar[int] = 0

    def __post_init__(self, start: int) -> None:
        pass


class _SlottedBase:
    """Not a dataclass: its slot is no default for the record's field of that name."""

    __slots__ = ("slot",)


def _samples() -> list[tuple[dict[str, bool], Callable[[], type]]]:
    """Classes (made anew at each call: ``dataclass`` changes what it is given) and options."""

    def fields() -> type:
        class Sample:
            """Every kind of plain field."""

            a: int
            b: str | None = None
            c: tuple[int, ...] = ()
            d: list[int] = field(default_factory=list, repr=False)
            e: int = field(default=3, kw_only=True, metadata={"k": 1})
            f: int = field(init=False, default=0, compare=False, hash=False)
            g: int = field(default=0, init=False)

        return Sample

    def inherits() -> type:
        class Derived(_FrozenBase):
            """Fields after a dataclass base's (and its InitVar, which __match_args__ lists)."""

            extra: str = "x"

        return Derived

    def own_methods() -> type:
        class Own:
            """Own __match_args__ and __repr__, kept."""

            __match_args__ = ("b",)
            a: int
            b: int = 1

            def __repr__(self) -> str:
                return "own"

        return Own

    def markers() -> type:
        class Marked:
            """Its own ClassVar, InitVar and KW_ONLY (string annotations, as in every module here)."""

            a: int
            count: ClassVar[int] = 0
            seed: InitVar[int] = 0
            _: dataclasses.KW_ONLY
            b: str = "b"

            def __post_init__(self, seed: int) -> None:
                pass

        return Marked

    def slotted_base() -> type:
        class OverSlot(_SlottedBase):
            """A field named as a base's slot."""

            slot: int
            other: bytes = b""

        return OverSlot

    options: list[dict[str, bool]] = [{}, {"frozen": True}, {"slots": True}, {"frozen": True, "slots": True}]
    return [
        *((option, fields) for option in [*options, {"frozen": True, "slots": True, "kw_only": True}]),
        ({"frozen": True}, inherits),
        ({"frozen": True, "slots": True}, inherits),
        *((option, own_methods) for option in options),
        *((option, markers) for option in options),
        ({}, slotted_base),
        ({"slots": True}, slotted_base),
    ]


def _code(method: Any) -> Any:
    function = getattr(method, "__wrapped__", method)  # (dataclass's __repr__ is wrapped against recursion)
    return function.__code__, function.__defaults__, function.__kwdefaults__, function.__globals__ is globals()


@pytest.mark.parametrize(("options", "make"), _samples())
def test_a_record_s_methods_are_made_as_dataclass_makes_them(options: dict[str, bool], make: Callable[[], type]) -> None:
    made = record(**options)(make())
    reference = dataclasses.dataclass(**options)(make())
    names = [name for name in ("__init__", "__repr__", "__eq__", "__hash__") if callable(reference.__dict__.get(name))]
    for name in names:
        own = make().__dict__.get(name)
        if own is not None:  # the class's own: kept
            assert made.__dict__[name].__code__ is own.__code__
            continue
        method = records._generated(made, name, options.get("frozen", False), options.get("slots", False))
        assert _code(method) == _code(reference.__dict__[name]), name
        assert method.__qualname__ == reference.__dict__[name].__qualname__


@pytest.mark.parametrize(("options", "make"), _samples())
def test_a_record_s_fields_and_annotations_are_the_dataclass_s(options: dict[str, bool], make: Callable[[], type]) -> None:
    """``record`` shows ``dataclass`` plain annotations as ``object`` while it declares: what is
    left afterwards is what ``dataclass`` itself leaves (field types, kinds, annotations)."""
    made = record(**options)(make())
    reference = dataclasses.dataclass(**options)(make())

    def described(cls: Any) -> list[tuple[str, Any, Any, bool]]:
        fields = cls.__dataclass_fields__.values()
        return [(f.name, f.type, f._field_type, f.kw_only) for f in fields]  # (pseudo-fields included)

    assert described(made) == described(reference)
    assert made.__annotations__ == reference.__annotations__
    assert made.__match_args__ == reference.__match_args__


def test_a_slotted_record_sets_a_field_its_init_does_not_take() -> None:
    @record(slots=True)
    class Counter:
        """A slotted record whose __init__ sets a field to its default (it has no class attribute)."""

        name: str
        count: int = field(default=0, init=False)

    assert Counter("c").count == 0


def test_a_record_takes_the_initvar_of_a_dataclass_base() -> None:
    seen: list[int] = []

    @record(frozen=True)
    class Derived(_FrozenBase):
        """The base's InitVar is an argument of __init__, given to __post_init__."""

        extra: str = "x"

        def __post_init__(self, start: int) -> None:
            seen.append(start)

    assert Derived.__match_args__ == ("base", "start", "extra")
    assert Derived(1, 2, "y") == Derived(1, 3, "y") and seen == [2, 3]
    assert repr(Derived(1)) == "test_a_record_takes_the_initvar_of_a_dataclass_base.<locals>.Derived(base=1, extra='x')"
