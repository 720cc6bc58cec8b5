"""A Jupyter server identity for tests: the user a browser's ``mkl_test_user`` cookie names, as JupyterHub names
the person behind each request (two people sharing one server in real time, each known by name)."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.identity import IdentityProvider, User


class CookieNamedUsers(IdentityProvider):
    """Each request's user is the one its ``mkl_test_user`` cookie names (a request without one, the test's own
    polling, is the server's)."""

    def get_user(self, handler: Any) -> User:
        name = handler.get_cookie("mkl_test_user") or "server"
        return User(username=name, name=name, display_name=name)
