"""Who may see and who may act on a namespace in the explorer.

A member with role ``viewer`` sees; ``reviewer`` may act; ``admin`` may act and manage the
namespace's members and API tokens; superusers see, act and manage everywhere.
A namespace the user is not a member of answers 404, so its existence does not leak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404

from memory.domain import SUPERUSER, may_act, may_manage
from memory.selectors.access import member_role, namespace_named
from memory.selectors.fresh import expiry_checked

if TYPE_CHECKING:  # the explorer reads through memory.selectors; the model is a type here
    from memory.models import Namespace


@dataclass(frozen=True)
class Access:
    """The namespace a request works on and what the user may do there."""

    namespace: Namespace
    role: str  # a Role, or SUPERUSER

    @property
    def can_act(self) -> bool:
        return may_act(self.role)

    @property
    def can_manage(self) -> bool:
        return may_manage(self.role)


def namespace_access(user: AbstractBaseUser | AnonymousUser, name: str) -> Access:
    """The user's access to namespace ``name``; Http404 when there is none (or no such name)."""
    namespace = namespace_named(name)
    if namespace is None:
        raise Http404("no such namespace")
    if getattr(user, "is_superuser", False):
        return Access(expiry_checked(namespace), SUPERUSER)
    if user.pk is None:
        raise Http404("no such namespace")
    role = member_role(namespace=namespace, user_id=user.pk)
    if role is None:
        raise Http404("no such namespace")
    return Access(expiry_checked(namespace), role)


def require_reviewer(access: Access) -> None:
    """Refuse a write by a viewer: the buttons are hidden, and a forged POST gets 403."""
    if not access.can_act:
        raise PermissionDenied("reviewers only")


def require_admin(access: Access) -> None:
    """Members and tokens are managed by the namespace's admins (and superusers) only."""
    if not access.can_manage:
        raise PermissionDenied("admins only")
