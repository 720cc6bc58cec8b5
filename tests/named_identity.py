"""Jupyter server identity providers for browser tests, as a server behind a real login (JupyterHub's, an OAuth
provider's) names the person behind each request: every request is the one named user ``erin`` (``NamedUser``),
or the user a browser's ``mkl_test_user`` cookie names (``CookieNamedUsers``: two people sharing one server).
Configured on the command line with ``--ServerApp.identity_provider_class=named_identity.CLASS`` and this
folder on PYTHONPATH."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.identity import IdentityProvider, User

NAME = "erin"


class NamedUser(IdentityProvider):
    """Says every request comes from :data:`NAME`."""

    def get_user(self, handler: Any) -> User:
        return User(username=NAME, name="Erin Example", display_name="Erin")


class CookieNamedUsers(IdentityProvider):
    """Each request's user is the one its ``mkl_test_user`` cookie names (a request without one, the test's own
    polling, is the server's)."""

    def get_user(self, handler: Any) -> User:
        name = handler.get_cookie("mkl_test_user") or "server"
        return User(username=name, name=name, display_name=name)
