"""How an output serializer renders an answer (:mod:`memory.api.outputs` holds them all).

:class:`Out` renders from what a selector returns (a dict or an object, by attribute, through a
dotted ``source`` too): its declared fields, in their order, nested serializers rendered in
turn. A field that is not ``required`` may be absent from the source, and is then absent from
the answer; ``omit`` names fields left out when they hold a value (``as_of`` when it is None).
Values pass to the JSON renderer as they are: it writes times in ISO 8601 with ``Z`` exactly as
``DateTimeField`` does, and numbers and strings as themselves. The plan of each serializer is
compiled once per class, so an answer of a thousand history entries costs what building its
dicts by hand cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rest_framework import serializers

_MISSING = object()
Step = tuple[str, str, tuple[str, ...], bool, bool, object, Callable[[Any], Any] | None]


class Out(serializers.Serializer):
    """Base of the output serializers: ``render(instance) -> dict`` (see the module)."""

    #: Fields left out of the answer when they hold this value.
    omit: ClassVar[Mapping[str, object]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__doc__ is None:  # the schema describes a shape by its own words, or none
            cls.__doc__ = ""

    @classmethod
    def render(cls, instance: Any) -> dict[str, Any]:
        plan: list[Step] | None = cls.__dict__.get("_plan")
        if plan is None:
            plan = _compile(cls)
            cls._plan = plan  # type: ignore[attr-defined]
        out: dict[str, Any] = {}
        is_map = isinstance(instance, Mapping)
        for name, source, through, required, omits, omitted, convert in plan:
            value = (instance.get(source, _MISSING) if is_map
                     else getattr(instance, source, _MISSING))
            for part in through:  # a dotted source: "namespace.name"
                value = _MISSING if value is _MISSING else getattr(value, part, _MISSING)
            if value is _MISSING:
                if required:
                    raise KeyError(f"{cls.__name__}: no {source!r} to render")
                continue
            if omits and value == omitted:
                continue
            out[name] = value if convert is None or value is None else convert(value)
        return out

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return type(self).render(instance)


class OneOf(serializers.Field):
    """A value rendered by one of several output serializers, picked by :meth:`pick`; in the
    schema, ``oneOf`` them (subclasses carry the ``extend_schema_field``)."""

    choices: ClassVar[Mapping[str, type[Out]]] = {}

    @classmethod
    def pick(cls, value: Any) -> type[Out]:
        raise NotImplementedError

    @classmethod
    def render(cls, value: Any) -> dict[str, Any]:
        return cls.pick(value).render(value)

    def to_representation(self, value: Any) -> dict[str, Any]:
        return type(self).render(value)


def _converter(field: serializers.Field) -> Callable[[Any], Any] | None:
    if isinstance(field, serializers.ListSerializer) and isinstance(field.child, Out):
        child = type(field.child).render
        return lambda values: [child(v) for v in values]
    if isinstance(field, serializers.ListField) and isinstance(field.child, OneOf):
        pick = type(field.child).render
        return lambda values: [pick(v) for v in values]
    if isinstance(field, Out | OneOf):
        return type(field).render
    return None  # a plain value: the JSON renderer writes it


def _compile(cls: type[Out]) -> list[Step]:
    plan: list[Step] = []
    for name, field in cls._declared_fields.items():
        first, *through = (field.source or name).split(".")
        plan.append((name, first, tuple(through), field.required, name in cls.omit,
                     cls.omit.get(name), _converter(field)))
    return plan
