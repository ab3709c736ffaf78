"""Namespaces and memberships (API tokens: ``memory.services.tokens``)."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.db import transaction

from memory.llm.embedding import embedder_id
from memory.models import AuditEntry, Membership, Namespace

from .tokens import audit_record

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")
#: The rule every refusal of a namespace name states (README, "Namespaces").
NAME_RULE = ("namespace names are 1-100 characters: lower-case ASCII letters, digits, '-' and "
             "'_', starting with a letter or digit (no '.', '@', upper case or other "
             "characters: map a user id to such a name, e.g. a hash of it)")


class InvalidName(ValueError):
    pass


class LastAdmin(ValueError):
    """The change would leave a namespace that has admins without one."""


def name_check(name: str) -> None:
    """Refuse (:class:`InvalidName`, stating :data:`NAME_RULE`) what cannot name a
    namespace."""
    if not NAME_RE.fullmatch(name):
        raise InvalidName(f"{name!r}: {NAME_RULE}")


def namespace_create(*, name: str) -> Namespace:
    """Create the namespace ``name`` if it does not exist; return it either way. A new
    namespace records the configured embedder: its vectors will all be that one's."""
    name_check(name)
    namespace, _ = Namespace.objects.get_or_create(name=name,
                                                   defaults={"embedder": embedder_id()})
    return namespace


def _refuse_last_admin(namespace: Namespace, user: User) -> None:
    admins = list(Membership.objects.select_for_update().filter(
        namespace=namespace, role=Membership.Role.ADMIN).values_list("user_id", flat=True))
    if admins == [user.pk]:
        raise LastAdmin(f"{user.get_username()} is the only admin of {namespace.name}; "
                        "make another member admin first")


@transaction.atomic
def membership_set(*, namespace: Namespace, user: User, role: str,
                   actor: str = "system") -> Membership:
    """Give ``user`` ``role`` in ``namespace`` (adding the membership if needed); audited when
    it changes anything. Refuses to demote the namespace's last admin (LastAdmin)."""
    role = Membership.Role(role).value
    current = Membership.objects.select_for_update().filter(namespace=namespace, user=user).first()
    if current is not None and current.role == role:
        return current
    if current is not None and current.role == Membership.Role.ADMIN:
        _refuse_last_admin(namespace, user)
    membership, _ = Membership.objects.update_or_create(
        namespace=namespace, user=user, defaults={"role": role})
    audit_record(namespace=namespace, actor=actor, action=AuditEntry.Action.MEMBER_SET,
                 target=f"user {user.get_username()}",
                 detail={"user": user.pk, "role": role,
                         "was": current.role if current is not None else None})
    return membership


@transaction.atomic
def membership_remove(*, namespace: Namespace, user: User, actor: str) -> bool:
    """Remove ``user`` from ``namespace``; audited. False when not a member. Refuses to
    remove the last admin (LastAdmin)."""
    current = Membership.objects.select_for_update().filter(namespace=namespace, user=user).first()
    if current is None:
        return False
    if current.role == Membership.Role.ADMIN:
        _refuse_last_admin(namespace, user)
    current.delete()
    audit_record(namespace=namespace, actor=actor, action=AuditEntry.Action.MEMBER_REMOVE,
                 target=f"user {user.get_username()}", detail={"user": user.pk, "was": current.role})
    return True
