"""SASL frame bodies (OASIS AMQP 1.0 Part 5, §5.3.3)."""

from __future__ import annotations

from .composite import Composite, composite, field

__all__ = [
    "SaslChallenge", "SaslInit", "SaslMechanisms", "SaslOutcome", "SaslResponse",
    "SASL_OK", "SASL_AUTH", "SASL_SYS", "SASL_SYS_PERM", "SASL_SYS_TEMP",
]  # fmt: skip

# sasl-code (§5.3.3.6)
SASL_OK = 0
SASL_AUTH = 1
SASL_SYS = 2
SASL_SYS_PERM = 3
SASL_SYS_TEMP = 4


@composite(0x40, "amqp:sasl-mechanisms:list")
class SaslMechanisms(Composite):
    """Mechanisms the server supports (§5.3.3.1)."""

    sasl_server_mechanisms: list[str] = field("symbol*", default=None, mandatory=True)


@composite(0x41, "amqp:sasl-init:list")
class SaslInit(Composite):
    """The client's chosen mechanism and initial response (§5.3.3.2)."""

    mechanism: str = field("symbol", default=None, mandatory=True)
    initial_response: bytes | None = field("binary", default=None)
    hostname: str | None = field("string", default=None)


@composite(0x42, "amqp:sasl-challenge:list")
class SaslChallenge(Composite):
    """A security challenge (§5.3.3.3)."""

    challenge: bytes = field("binary", default=None, mandatory=True)


@composite(0x43, "amqp:sasl-response:list")
class SaslResponse(Composite):
    """A response to a challenge (§5.3.3.4)."""

    response: bytes = field("binary", default=None, mandatory=True)


@composite(0x44, "amqp:sasl-outcome:list")
class SaslOutcome(Composite):
    """The outcome of the SASL exchange (§5.3.3.5)."""

    code: int = field("ubyte", default=None, mandatory=True)
    additional_data: bytes | None = field("binary", default=None)
