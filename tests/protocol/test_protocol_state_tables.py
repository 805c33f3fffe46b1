"""Every (state, input) pair of every transition table in ``_state`` (Part 2 §2.4.6, §2.5.5, §2.6)."""

from __future__ import annotations

import enum
import itertools

import pytest

from minibroker.amqp import errors as conditions
from minibroker.protocol import _state
from minibroker.protocol._state import (
    CONNECTION_TRANSITIONS,
    LINK_TRANSITIONS,
    PHASE_TRANSITIONS,
    SESSION_TRANSITIONS,
    ConnectionState,
    IllegalTransition,
    Input,
    LinkState,
    Phase,
    SessionState,
    advance,
)
from minibroker.protocol.errors import AMQPProtocolError, ConnectionError_

TABLES: list[tuple[str, type[enum.Enum], dict[tuple[enum.Enum, Input], enum.Enum]]] = [
    ("connection", Phase, PHASE_TRANSITIONS),  # type: ignore[list-item]
    ("connection", ConnectionState, CONNECTION_TRANSITIONS),  # type: ignore[list-item]
    ("session", SessionState, SESSION_TRANSITIONS),  # type: ignore[list-item]
    ("link", LinkState, LINK_TRANSITIONS),  # type: ignore[list-item]
]
INITIAL = {
    Phase: Phase.AWAIT_HEADER,
    ConnectionState: ConnectionState.START,
    SessionState: SessionState.UNMAPPED,
    LinkState: LinkState.DETACHED,
}


def test_every_table_in_the_module_is_covered() -> None:
    tables = {name for name in vars(_state) if name.endswith("_TRANSITIONS")}
    assert tables == {"PHASE_TRANSITIONS", "CONNECTION_TRANSITIONS", "SESSION_TRANSITIONS", "LINK_TRANSITIONS"}


PAIRS = [
    pytest.param(kind, table, state, event, id=f"{kind}-{state.value}-{event.name}")
    for kind, states, table in TABLES
    for state, event in itertools.product(states, Input)
]


def test_cross_product_is_complete() -> None:
    assert len(PAIRS) == sum(len(states) * len(Input) for _, states, _ in TABLES)


@pytest.mark.parametrize(("kind", "table", "state", "event"), PAIRS)
def test_every_state_input_pair(
    kind: str, table: dict[tuple[enum.Enum, Input], enum.Enum], state: enum.Enum, event: Input
) -> None:
    if (state, event) in table:
        assert advance(state, event, "under-test") is table[(state, event)]
        return
    with pytest.raises(IllegalTransition) as info:
        advance(state, event, "under-test")
    error = info.value
    assert isinstance(error, ConnectionError_) and isinstance(error, AMQPProtocolError)
    assert error.scope == "connection"
    assert error.condition == conditions.ILLEGAL_STATE
    assert error.kind == kind and error.state is state and error.event is event
    assert error.description == f"{kind} under-test is in state {state.value} and cannot {event.value}"
    assert str(error) == f"{conditions.ILLEGAL_STATE}: {error.description}"


@pytest.mark.parametrize(("kind", "states", "table"), TABLES, ids=[t[0] for t in TABLES])
def test_table_is_well_formed(
    kind: str, states: type[enum.Enum], table: dict[tuple[enum.Enum, Input], enum.Enum]
) -> None:
    for (state, event), new_state in table.items():
        assert type(state) is states and type(new_state) is states and type(event) is Input
    # Every state is reachable from the initial one, and the initial one is reachable again (a full cycle).
    start = INITIAL[states]
    seen = {start}
    frontier = [start]
    returns = False
    while frontier:
        state = frontier.pop()
        for (source, _event), target in table.items():
            if source is state:
                returns = returns or target is start
                if target not in seen:
                    seen.add(target)
                    frontier.append(target)
    assert seen == set(states), f"unreachable {kind} states: {set(states) - seen}"
    if states is not ConnectionState and states is not Phase:  # a connection is never reused
        assert returns, f"a {kind} endpoint can never be reused"


@pytest.mark.parametrize(
    ("path", "end"),
    [
        (
            [Input.RECV_HEADER, Input.RECV_OPEN, Input.SEND_OPEN, Input.RECV_CLOSE, Input.SEND_CLOSE],
            ConnectionState.END,
        ),
        (
            [Input.RECV_HEADER, Input.RECV_OPEN, Input.SEND_OPEN, Input.SEND_CLOSE, Input.RECV_CLOSE],
            ConnectionState.END,
        ),
        ([Input.RECV_BEGIN, Input.SEND_BEGIN, Input.RECV_END, Input.SEND_END], SessionState.UNMAPPED),
        ([Input.RECV_BEGIN, Input.SEND_BEGIN, Input.SEND_END, Input.RECV_END], SessionState.UNMAPPED),
        ([Input.RECV_ATTACH, Input.SEND_ATTACH, Input.RECV_DETACH, Input.SEND_DETACH], LinkState.DETACHED),
        ([Input.RECV_ATTACH, Input.SEND_ATTACH, Input.SEND_DETACH, Input.RECV_DETACH], LinkState.DETACHED),
        ([Input.RECV_ATTACH, Input.SEND_ATTACH, Input.SESSION_ENDED], LinkState.DETACHED),
        ([Input.RECV_BEGIN, Input.SEND_BEGIN, Input.CONNECTION_ENDED], SessionState.UNMAPPED),
        ([Input.RECV_SASL_HEADER, Input.SEND_SASL_OK, Input.RECV_HEADER], Phase.FRAMES),
        ([Input.RECV_HEADER], Phase.FRAMES),
    ],
)
def test_lifecycles(path: list[Input], end: enum.Enum) -> None:
    state: enum.Enum = INITIAL[type(end)]
    for event in path:
        state = advance(state, event, "x")
    assert state is end
