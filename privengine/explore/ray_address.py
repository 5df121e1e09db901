"""Joining an existing Ray cluster: the address checked before ``ray.init`` and its refusals said in one sentence.

``ray.init(address=...)`` on an address where nothing listens retries for minutes (3.5 min measured for a refused
port), and on a cluster whose ``ray start`` enabled token authentication (the default of ``ray start --head`` in
recent Ray) without this driver's token it retries for about 20 s and raises a ``ConnectionError`` whose cause holds
an ``AuthenticationError`` traceback. Here the address is first connected to over TCP (a few seconds at most), and a
failed join becomes a :class:`~privengine.errors.ConfigError` of the ``address`` field (the CLI's ``--address``, the
Explore page's *Ray address*) that names the address and what to do.
"""

from __future__ import annotations

import socket
from importlib.metadata import version

from privengine.errors import ConfigError

CONNECT_TIMEOUT_S = 5.0
RAY_WORDS = ("auto", "local")  # addresses Ray resolves itself (a cluster recorded on this machine, a new one)
CLIENT_SCHEME = "ray://"
FORMS = "HOST:PORT (the address `ray start --head` printed, e.g. 10.0.0.5:6379), ray://HOST:PORT or auto"
TOKEN_HELP = ("set RAY_AUTH_MODE=token where privengine runs, with the cluster's token (`ray get-auth-token` on the "
              "head prints it) in ~/.ray/auth_token, $RAY_AUTH_TOKEN_PATH or $RAY_AUTH_TOKEN")


def host_port(address: str) -> tuple[str, int] | None:
    """The TCP endpoint of a cluster address (``HOST:PORT``, ``[IPv6]:PORT`` or ``ray://HOST:PORT``); None for the
    words Ray resolves itself (``auto``, ``local``). ConfigError naming ``address`` for anything else."""
    if address in RAY_WORDS:
        return None
    rest = address[len(CLIENT_SCHEME):] if address.startswith(CLIENT_SCHEME) else address
    host, sep, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError("address", f"must be {FORMS}, with a port in [1, 65535]; got {address!r}")
    return host, int(port)


def check_reachable(address: str, *, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Connect to ``address`` over TCP and close again; ConfigError naming ``address`` (and what to do) when the
    connection is refused, times out or the host is unknown. Says nothing of what listens there: :func:`join_error`
    explains a refusal by Ray itself."""
    endpoint = host_port(address)
    if endpoint is None:
        return
    try:
        socket.create_connection(endpoint, timeout=timeout).close()
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__).lower()
        raise ConfigError("address", f"{address} cannot be reached ({why}): no Ray cluster listens there. Start "
                                     f"one (`ray start --head --port {endpoint[1]}` on {endpoint[0]}) or give the "
                                     f"address its `ray start` printed") from None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, outermost first."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def join_error(address: str, exc: BaseException) -> ConfigError:
    """The one-sentence error for ``ray.init(address=address)`` having raised ``exc``: an authentication refusal
    (Ray's ``AuthenticationError`` or its ``InvalidAuthToken`` / ``Unauthenticated`` text anywhere in the chain)
    says how to pass the token; anything else says the cluster refused the driver, with Ray's first line."""
    chain = _chain(exc)
    text = " ".join(f"{type(e).__name__} {e}" for e in chain)
    if any(word in text for word in ("AuthenticationError", "InvalidAuthToken", "Unauthenticated")):
        return ConfigError("address", f"{address}: the Ray cluster there uses token authentication and refused this "
                                      f"driver, which sent no token or another one; {TOKEN_HELP}")
    first = " ".join(str(exc).split()).split(". ")[0][:200]
    return ConfigError("address", f"{address}: could not join the Ray cluster there ({type(exc).__name__}: {first}); "
                                  f"check that it is up (`ray status` on its head node) and runs Ray "
                                  f"{version('ray')}, the version installed here")
