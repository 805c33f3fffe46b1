"""``minibroker.records.record``: a dataclass whose methods are generated at their first call."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import field

import pytest

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
