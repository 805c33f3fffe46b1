"""Frames of either wire protocol described the same way: the protocol-neutral side of the tap.

The tap (:mod:`.tap`) hands its observers each protocol's own frame object: an AMQP 1.0
performative or SASL frame body (Part 2 §2.7, Part 5 §5.3), or an AMQP 0-9-1 method with the
content that followed it (:class:`minibroker.amqp091.observed.MethodFrame`).  What a frame log,
a failure report or a picture needs of one is the same whatever the protocol, and is asked here:

:func:`protocol_of`
    ``"AMQP 1.0"`` or ``"AMQP 0-9-1"``.
:func:`name_of`
    the performative's or method's name: ``transfer``, ``sasl-init``, ``basic.deliver``.
:func:`fields_of`
    its key fields by their specification names: ``handle``, ``delivery-id`` (1.0);
    ``delivery-tag``, ``consumer-tag``, ``routing-key`` (0-9-1).
:func:`body_of`
    a short rendering of the message a frame carries whole (a 0-9-1 publish or delivery), else
    None (a 1.0 transfer's performative does not hold its message).
:func:`summarize`
    one line saying what the frame says: ``attach 'orders-sender' handle=0 sender source=null
    target='orders'``, ``basic.deliver consumer-tag='ctag1' delivery-tag=1 ...``.

A frame of another protocol describes itself by satisfying :class:`DescribedFrame`; AMQP 1.0
performatives are described here, by their descriptor names, so that their classes stay plain
codec declarations.  Everything here runs when a record is read, never as a frame passes.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

__all__ = ["AMQP10", "DescribedFrame", "body_of", "fields_of", "name_of", "protocol_of", "summarize"]

AMQP10 = "AMQP 1.0"
#: Longest rendering of an unknown frame.
SHORT = 80
#: The 1.0 performative fields that name a link, a delivery or credit (Part 2 §2.7), shown as key fields.
_KEY_FIELDS_10 = ("name", "handle", "delivery_id", "first", "last", "settled", "link_credit", "delivery_count")


class DescribedFrame(Protocol):
    """A frame of a protocol other than AMQP 1.0 that describes itself (``MethodFrame``)."""

    PROTOCOL: ClassVar[str]

    @property
    def name(self) -> str: ...

    def fields(self) -> dict[str, Any]: ...

    def body_summary(self) -> str | None: ...

    def summary(self) -> str: ...


def _described(frame: Any) -> DescribedFrame | None:
    """``frame`` if it describes itself (it names its protocol), else None (an AMQP 1.0 frame)."""
    return frame if isinstance(getattr(type(frame), "PROTOCOL", None), str) else None


def protocol_of(frame: Any) -> str:
    described = _described(frame)
    return AMQP10 if described is None else described.PROTOCOL


def name_of(frame: Any) -> str:
    """``open``, ``attach``, ``transfer``, ``sasl-init`` ... (1.0); ``basic.publish`` ... (0-9-1)."""
    described = _described(frame)
    if described is not None:
        return described.name
    return str(frame.DESCRIPTOR_NAME).split(":")[1]


def fields_of(frame: Any) -> dict[str, Any]:
    """The frame's key fields by their specification names (unset ones left out)."""
    described = _described(frame)
    if described is not None:
        return described.fields()
    return {
        key.replace("_", "-"): value for key in _KEY_FIELDS_10 if (value := getattr(frame, key, None)) is not None
    }


def body_of(frame: Any) -> str | None:
    described = _described(frame)
    return None if described is None else described.body_summary()


# --------------------------------------------------------------------------- AMQP 1.0


def _short(value: Any, limit: int = SHORT) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error(error: Any) -> str:
    if error is None:
        return ""
    description = f" {error.description!r}" if getattr(error, "description", None) else ""
    return f" error={error.condition}{description}"


def _terminus(terminus: Any) -> str:
    if terminus is None:
        return "null"
    if getattr(terminus, "dynamic", False):
        return "dynamic"
    address = getattr(terminus, "address", None)
    return "null" if address is None else repr(str(address))


def _state(state: Any) -> str:
    if state is None:
        return ""
    return " " + type(state).__name__.lower()


def _n(value: Any) -> str:
    """A wire number without its AMQP type (``uint(3)`` -> ``3``)."""
    return "null" if value is None else str(int(value))


def summarize(frame: Any) -> str:
    """One short line naming what a frame says: ``attach 'orders-sender' sender target='orders'``."""
    described = _described(frame)
    if described is not None:
        return described.summary()
    descriptor = str(getattr(frame, "DESCRIPTOR_NAME", ""))
    name = descriptor.split(":")[1] if descriptor.count(":") >= 2 else type(frame).__name__.lower()
    p = frame
    if name == "open":
        return f"open container-id={p.container_id!r}"
    if name == "begin":
        return "begin" + (f" remote-channel={_n(p.remote_channel)}" if p.remote_channel is not None else "")
    if name == "attach":
        role = "receiver" if p.role else "sender"
        return f"attach {str(p.name)!r} handle={_n(p.handle)} {role} source={_terminus(p.source)} target={_terminus(p.target)}"
    if name == "flow":
        if p.handle is None:
            return f"flow session incoming-window={_n(p.incoming_window)}"
        drain = " drain" if p.drain else ""
        return f"flow handle={_n(p.handle)} credit={_n(p.link_credit)} delivery-count={_n(p.delivery_count)}{drain}"
    if name == "transfer":
        flags = "".join(f" {flag}" for flag in ("settled", "more", "aborted") if getattr(p, flag))
        return f"transfer handle={_n(p.handle)} delivery-id={_n(p.delivery_id)}{flags}{_state(p.state)}"
    if name == "disposition":
        ids = _n(p.first) if p.last is None or p.last == p.first else f"{_n(p.first)}..{_n(p.last)}"
        role = "receiver" if p.role else "sender"
        return f"disposition {role} {ids}{' settled' if p.settled else ''}{_state(p.state)}"
    if name == "detach":
        return f"detach handle={_n(p.handle)}{' closed' if p.closed else ''}{_error(p.error)}"
    if name in ("end", "close"):
        return name + _error(p.error)
    if name == "sasl-mechanisms":
        return "sasl-mechanisms " + " ".join(str(m) for m in p.sasl_server_mechanisms or ())
    if name == "sasl-init":
        return f"sasl-init {p.mechanism}"
    if name == "sasl-outcome":
        return f"sasl-outcome code={_n(p.code)}"
    return _short(frame)
