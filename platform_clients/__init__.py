"""One module per project: raw socket event / poll result → domain events (DESIGN §5)."""
from platform_clients.base import BadAnswer, BadRawEvent, PlatformClient, UnknownRawEvent
from platform_clients.chathouse import ChathouseClient
from platform_clients.golden import GoldenClient
from platform_clients.prime import PrimeClient

CLIENTS: dict[str, type[PlatformClient]] = {
    c.project: c for c in (GoldenClient, ChathouseClient, PrimeClient)
}


def client_for(project: str) -> type[PlatformClient]:
    """The client of ``project``; KeyError names the unknown project."""
    try:
        return CLIENTS[project]
    except KeyError:
        raise KeyError(f"unknown project {project!r} (expected one of {sorted(CLIENTS)})") from None


__all__ = ["CLIENTS", "client_for", "PlatformClient", "BadAnswer", "BadRawEvent", "UnknownRawEvent"]
