"""How an output serializer renders an answer (:mod:`memory.api.outputs` holds them all).

:class:`Out` renders from what a selector returns (a dict or an object, by attribute, through a
dotted ``source`` too): its declared fields, in their order, nested serializers rendered in
turn. A field that is not ``required`` may be absent from the source, and is then absent from
the answer; ``omit`` names fields left out when they hold a value (``as_of`` when it is None).
Values pass to the JSON renderer as they are: it writes times in ISO 8601 with ``Z`` exactly as
``DateTimeField`` does, and numbers and strings as themselves.

Each serializer's plan is worked out once, when its class is made — per declared field: its
name, where it reads from, whether it must be there, the value that leaves it out, the nested
serializer that converts it — and rendering walks that plan: an answer of a thousand history
entries costs a loop over a few tuples per row, where DRF's generic ``to_representation`` walks
bound field copies value by value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar, NamedTuple

from rest_framework import serializers

_MISSING = object()


class Out(serializers.Serializer):
    """Base of the output serializers: ``render(instance) -> dict`` (see the module)."""

    #: Fields left out of the answer when they hold this value.
    omit: ClassVar[Mapping[str, object]] = {}
    _render: ClassVar[Callable[[Any], dict[str, Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__doc__ is None:  # the schema describes a shape by its own words, or none
            cls.__doc__ = ""
        # Written here: the declared fields are known when the class is made, and a nested
        # serializer is always declared before the one that holds it.
        cls._render = staticmethod(_renderer(cls))

    @classmethod
    def render(cls, instance: Any) -> dict[str, Any]:
        return cls._render(instance)

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


class _Extra(NamedTuple):
    """What a field needs beyond a plain read and store (most fields need none of it)."""

    through: tuple[str, ...]  # read attribute by attribute after the first (a dotted ``source``)
    omits: bool  # the field is left out when it holds ``omit``
    omit: object
    convert: Callable[[Any], Any] | None  # a nested serializer's render (None stays None)


class _Step(NamedTuple):
    """One declared field's part of a render."""

    name: str
    first: str  # the attribute or key read from the instance
    required: bool  # absent from the instance: refused (KeyError), else left out
    extra: _Extra | None


def _plan(cls: type[Out]) -> tuple[_Step, ...]:
    steps = []
    for name, field in cls._declared_fields.items():
        first, *through = (field.source or name).split(".")
        extra = _Extra(tuple(through), name in cls.omit, cls.omit.get(name), _converter(field))
        plain = not (extra.through or extra.omits or extra.convert)
        steps.append(_Step(name, first, field.required, None if plain else extra))
    return tuple(steps)


def _renderer(cls: type[Out]) -> Callable[[Any], dict[str, Any]]:
    """The render function of ``cls``: per declared field, read it (a dict's get, else
    getattr), refuse or leave out its absence, leave it out when it holds its omitted value,
    convert it if nested, store it. A plain field takes the short way: this runs per row."""
    steps = _plan(cls)
    serializer = cls.__name__

    def render(x: Any) -> dict[str, Any]:
        # dict, not the Mapping ABC: its isinstance is a slow path, taken on every row.
        get = x.get if isinstance(x, dict) else partial(getattr, x)
        out: dict[str, Any] = {}
        for name, first, required, extra in steps:
            v = get(first, _MISSING)
            if extra is not None:
                for part in extra.through:
                    if v is _MISSING:
                        break
                    v = getattr(v, part, _MISSING)
            if v is _MISSING:
                if required:
                    raise KeyError(f"{serializer}: no {first!r} to render")
                continue
            if extra is not None:
                if extra.omits and v == extra.omit:
                    continue
                if extra.convert is not None and v is not None:
                    v = extra.convert(v)
            out[name] = v
        return out

    return render
