"""The Service Bus emulator's configuration file (``Config.json``) as :class:`ServiceBusOptions`.

Microsoft's emulator declares its entities in a JSON file (schema:
``ServiceBus-Emulator/Schema/Config-schema.json`` of
Azure/azure-service-bus-emulator-installer)::

    {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns",
        "Queues": [{"Name": "orders", "Properties": {"MaxDeliveryCount": 3, "LockDuration": "PT1M", ...}}],
        "Topics": [{"Name": "events", "Properties": {...},
                    "Subscriptions": [{"Name": "audit", "Properties": {...},
                                       "Rules": [{"Name": "big", "Properties": {"FilterType": "Sql",
                                                  "SqlFilter": {"SqlExpression": "amount > 100"},
                                                  "Action": {"SqlExpression": "SET big = TRUE"}}}]}]}]}],
      "Logging": {"Type": "File"}}}

:func:`load_emulator_config` reads it so a team's config works unchanged
(``minibroker serve --servicebus-config Config.json``).  Times are ISO 8601
durations (``PT1M``).  ``Logging`` is read and ignored; a subscription given
rules has those instead of ``$Default``.
Anything malformed raises :class:`ValueError` naming where in the file it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .options import CorrelationFilter, EntityProperties, ServiceBusOptions, SqlFilter, SubscriptionRule

__all__ = ["load_emulator_config", "parse_duration"]

_DURATION = re.compile(
    r"P(?!$)(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)
#: Seconds per unit; a year and a month as .NET's TimeSpan parsing of the emulator takes them (365 and 30 days).
_SECONDS = {"years": 365 * 86400, "months": 30 * 86400, "weeks": 7 * 86400, "days": 86400, "hours": 3600,
            "minutes": 60, "seconds": 1}  # fmt: skip
_CORRELATION_FIELDS = {
    "CorrelationId": "correlation_id", "MessageId": "message_id", "To": "to", "ReplyTo": "reply_to",
    "Label": "subject", "SessionId": "session_id", "ReplyToSessionId": "reply_to_session_id",
    "ContentType": "content_type",
}  # fmt: skip


def parse_duration(text: str, where: str = "duration") -> float:
    """An ISO 8601 duration (``PT1M``, ``P1DT2H``, ``PT0.5S``) in seconds."""
    matched = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if matched is None:
        raise ValueError(f"{where}: expected an ISO 8601 duration such as 'PT1M' or 'PT20S', got {text!r}")
    return float(sum(float(value) * _SECONDS[unit] for unit, value in matched.groupdict().items() if value))


def load_emulator_config(source: str | Path | Mapping[str, Any]) -> ServiceBusOptions:
    """Read an emulator ``Config.json`` (a path, or its parsed content) into Service Bus options."""
    if isinstance(source, Mapping):
        document: Any = source
    else:
        try:
            document = json.loads(Path(source).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source}: not JSON: {exc}") from None
    user = _object(_object(document, "the file").get("UserConfig"), "UserConfig")
    namespaces = _array(user.get("Namespaces"), "UserConfig.Namespaces")
    if len(namespaces) != 1:
        raise ValueError(f"UserConfig.Namespaces: the emulator takes exactly one namespace, got {len(namespaces)}")
    namespace = _object(namespaces[0], "UserConfig.Namespaces[0]")
    queues: list[str] = []
    topics: dict[str, tuple[str, ...]] = {}
    rules: dict[str, tuple[SubscriptionRule, ...]] = {}
    entities: dict[str, EntityProperties] = {}
    for index, queue in enumerate(_array(namespace.get("Queues", []), "Queues")):
        where = f"Queues[{index}]"
        name = _name(_object(queue, where), where)
        queues.append(name)
        entities[name] = _properties(queue.get("Properties"), f"{where} ({name}).Properties")
    for index, topic in enumerate(_array(namespace.get("Topics", []), "Topics")):
        where = f"Topics[{index}]"
        name = _name(_object(topic, where), where)
        entities[name] = _properties(topic.get("Properties"), f"{where} ({name}).Properties")
        subscriptions = []
        for sub_index, subscription in enumerate(_array(topic.get("Subscriptions", []), f"{where}.Subscriptions")):
            sub_where = f"{where}.Subscriptions[{sub_index}]"
            sub_name = _name(_object(subscription, sub_where), sub_where)
            subscriptions.append(sub_name)
            key = f"{name}/{sub_name}"
            entities[key] = _properties(subscription.get("Properties"), f"{sub_where} ({key}).Properties")
            if "Rules" in subscription:
                rule_list = _array(subscription["Rules"], f"{sub_where}.Rules")
                rules[key] = tuple(_rule(rule, f"{sub_where}.Rules[{i}]") for i, rule in enumerate(rule_list))
        topics[name] = tuple(subscriptions)
    return ServiceBusOptions(queues=tuple(queues), topics=topics, rules=rules, entities=entities)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a JSON array, got {type(value).__name__}")
    return value


def _name(item: dict[str, Any], where: str) -> str:
    name = item.get("Name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: 'Name' must be a non-empty string, got {name!r}")
    return name


def _properties(value: Any, where: str) -> EntityProperties:
    if value is None:
        return EntityProperties()
    properties = _object(value, where)

    def duration(key: str) -> float | None:
        text = properties.get(key)
        return None if text is None else parse_duration(text, f"{where}.{key}")

    def flag(key: str) -> bool:
        value = properties.get(key, False)
        if not isinstance(value, bool):
            raise ValueError(f"{where}.{key}: expected true or false, got {value!r}")
        return value

    count = properties.get("MaxDeliveryCount")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise ValueError(f"{where}.MaxDeliveryCount: expected a positive integer, got {count!r}")
    window = duration("DuplicateDetectionHistoryTimeWindow")
    try:
        return EntityProperties(
            lock_duration=duration("LockDuration"),
            max_delivery_count=count,
            default_message_time_to_live=duration("DefaultMessageTimeToLive"),
            dead_lettering_on_message_expiration=flag("DeadLetteringOnMessageExpiration"),
            requires_duplicate_detection=flag("RequiresDuplicateDetection"),
            duplicate_detection_history_time_window=window if window is not None else 20.0,  # the emulator's default
            forward_to=properties.get("ForwardTo") or None,
            forward_dead_lettered_messages_to=properties.get("ForwardDeadLetteredMessagesTo") or None,
            requires_session=flag("RequiresSession"),
        )
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _rule(value: Any, where: str) -> SubscriptionRule:
    rule = _object(value, where)
    name = _name(rule, where)
    properties = _object(rule.get("Properties"), f"{where}.Properties")
    kind = properties.get("FilterType")
    filter_: SqlFilter | CorrelationFilter
    if kind == "Sql":
        expression = _object(properties.get("SqlFilter"), f"{where}.Properties.SqlFilter").get("SqlExpression")
        if not isinstance(expression, str):
            raise ValueError(f"{where}.Properties.SqlFilter.SqlExpression: expected a string, got {expression!r}")
        filter_ = SqlFilter(expression)
    elif kind == "Correlation":
        fields = _object(properties.get("CorrelationFilter"), f"{where}.Properties.CorrelationFilter")
        unknown = set(fields) - set(_CORRELATION_FIELDS) - {"Properties"}
        if unknown:
            raise ValueError(f"{where}.Properties.CorrelationFilter: unknown fields {sorted(unknown)}")
        given = {_CORRELATION_FIELDS[key]: str(value) for key, value in fields.items() if key in _CORRELATION_FIELDS}
        filter_ = CorrelationFilter(**given, properties=dict(fields.get("Properties") or {}))
    else:
        raise ValueError(f"{where}.Properties.FilterType: expected 'Sql' or 'Correlation', got {kind!r}")
    action = properties.get("Action")
    expression = _object(action, f"{where}.Properties.Action").get("SqlExpression") if action is not None else None
    return SubscriptionRule(name, filter_, expression or None)
