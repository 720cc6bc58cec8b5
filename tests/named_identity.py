"""A Jupyter server identity provider for browser tests: every request is the one named user ``erin``, as a
server behind a real login (JupyterHub's, an OAuth provider's) would say. Configured on the command line with
``--ServerApp.identity_provider_class=named_identity.NamedUser`` and this folder on PYTHONPATH."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.identity import IdentityProvider, User

NAME = "erin"


class NamedUser(IdentityProvider):
    """Says every request comes from :data:`NAME`."""

    def get_user(self, handler: Any) -> User:
        return User(username=NAME, name="Erin Example", display_name="Erin")
