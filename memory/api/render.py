"""How an output serializer renders an answer (:mod:`memory.api.outputs` holds them all).

:class:`Out` renders from what a selector returns (a dict or an object, by attribute, through a
dotted ``source`` too): its declared fields, in their order, nested serializers rendered in
turn. A field that is not ``required`` may be absent from the source, and is then absent from
the answer; ``omit`` names fields left out when they hold a value (``as_of`` when it is None).
Values pass to the JSON renderer as they are: it writes times in ISO 8601 with ``Z`` exactly as
``DateTimeField`` does, and numbers and strings as themselves.

Each serializer's renderer is written once, when its class is made, as a Python function with
one statement per field (the way :mod:`dataclasses` writes ``__init__``): an answer of a
thousand history entries costs what building its dicts by hand cost, where DRF's generic
``to_representation`` walks bound field copies value by value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar

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


def _missing(serializer: str, source: str) -> None:
    raise KeyError(f"{serializer}: no {source!r} to render")


def _renderer(cls: type[Out]) -> Callable[[Any], dict[str, Any]]:
    """The render function of ``cls``: per declared field, read it (``get``: a dict's get,
    else getattr), leave it out or refuse its absence, convert it if nested, store it."""
    scope: dict[str, Any] = {"M": _MISSING, "missing": _missing, "partial": partial,
                             "name": cls.__name__}
    body = ["def render(x):",
            # dict, not the Mapping ABC: its isinstance is a slow path, taken on every row.
            "    get = x.get if isinstance(x, dict) else partial(getattr, x)",
            "    out = {}"]
    for i, (name, field) in enumerate(cls._declared_fields.items()):
        first, *through = (field.source or name).split(".")
        body.append(f"    v = get({first!r}, M)")
        body += [f"    v = M if v is M else getattr(v, {part!r}, M)" for part in through]
        if field.required:
            body.append(f"    if v is M: missing(name, {first!r})")
        test = "v is not M"
        if name in cls.omit:
            scope[f"o{i}"] = cls.omit[name]
            test += f" and v != o{i}"
        convert = _converter(field)
        value = "v"
        if convert is not None:
            scope[f"c{i}"] = convert
            value = f"None if v is None else c{i}(v)"
        if field.required and name not in cls.omit:
            body.append(f"    out[{name!r}] = {value}")
        else:
            body.append(f"    if {test}: out[{name!r}] = {value}")
    body.append("    return out")
    exec("\n".join(body), scope)  # the source: the class's own declared field names
    render: Callable[[Any], dict[str, Any]] = scope["render"]
    return render
