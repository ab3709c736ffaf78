"""Namespaces, API tokens and memberships."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.db import transaction

from memory.models import ApiToken, Membership, Namespace

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")


class InvalidName(ValueError):
    pass


def namespace_create(*, name: str) -> Namespace:
    """Create the namespace ``name`` if it does not exist; return it either way."""
    if not NAME_RE.match(name):
        raise InvalidName(
            "namespace names are 1-100 characters: lower-case letters, digits, '-' and '_'"
        )
    namespace, _ = Namespace.objects.get_or_create(name=name)
    return namespace


def token_create(*, namespace: Namespace, client: str = "client") -> ApiToken:
    """A new API token that reaches ``namespace`` only."""
    return ApiToken.objects.create(namespace=namespace, client=client)


@transaction.atomic
def membership_set(*, namespace: Namespace, user: User, role: str) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        namespace=namespace, user=user, defaults={"role": role})
    return membership
