"""Router configuration: match mode, dedup window and the targets with their secrets (DESIGN §10
"Channels and targets"; seed 002 ``.env.example``: ``DEDUP_WINDOW_SECONDS``, ``ROUTING_MATCH_MODE``).

Rules / theory of operation
---------------------------
* pydantic-settings, two sources, environment first: ``SIDECAR_ROUTER_MATCH_MODE``,
  ``SIDECAR_ROUTER_DEDUP_WINDOW_S``, ``SIDECAR_ROUTER_TARGETS`` (JSON object name → target), then
  the file ``<data dir>/router.toml`` (:data:`CONFIG_FILE`).  Objects are merged key by key, so
  the file can hold a webhook's URL and the environment only its secret.
* A target: ``channel`` = ``journal`` | ``webhook`` | ``telegram`` (``stack`` always exists and is
  configured by ``--stack-url``; the name ``stack`` is reserved).  ``webhook``: ``url`` and a
  ``whsec_…`` secret; ``telegram``: ``chat_id``, a bot token, ``base_url`` (default the real Bot
  API; tests point it at a fake on loopback); ``journal``: ``path`` (default
  ``<data dir>/journal/<name>.jsonl``), rotated at ``max_bytes`` keeping ``backups`` files.
* **Secrets** (``secret``, ``bot_token``) come only from the environment or from a file named by
  ``secret_file`` / ``bot_token_file``: a secret written into ``router.toml`` is refused.  They
  are ``SecretStr`` (repr and logs show ``**********``); nothing here writes them anywhere.
* A bad setting raises :class:`ConfigError` with one line naming it (``sidecar serve`` prints it
  and exits 2).
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sidecar.domain.errors import InputError

CONFIG_FILE = "router.toml"
SECRET_KEYS = ("secret", "bot_token")


class ConfigError(InputError, ValueError):
    """A router setting is bad; the message names it."""


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: Literal["journal", "webhook", "telegram"]
    url: str | None = None  # webhook
    secret: SecretStr | None = Field(default=None, repr=False)  # webhook, "whsec_…"
    secret_file: Path | None = None
    chat_id: str | None = None  # telegram
    bot_token: SecretStr | None = Field(default=None, repr=False)
    bot_token_file: Path | None = None
    base_url: str = "https://api.telegram.org"
    path: Path | None = None  # journal file
    max_bytes: int = Field(default=10 << 20, ge=1024)
    backups: int = Field(default=5, ge=1)
    timeout_s: float = Field(default=5.0, gt=0, le=120)

    @model_validator(mode="after")
    def _complete(self) -> "Target":
        for name in ("url", "base_url"):
            v = getattr(self, name)
            if v is not None and not v.startswith(("http://", "https://")):
                raise ValueError(f"{name} {v!r} is not an http:// or https:// URL")
        if self.channel == "webhook":
            if not self.url:
                raise ValueError("a webhook target needs url")
            if self.secret is None and self.secret_file is None:
                raise ValueError("a webhook target needs a secret (env) or secret_file")
        if self.channel == "telegram":
            if not self.chat_id:
                raise ValueError("a telegram target needs chat_id")
            if self.bot_token is None and self.bot_token_file is None:
                raise ValueError("a telegram target needs bot_token (env) or bot_token_file")
        return self

    def read_secret(self) -> str:
        """The webhook secret or the bot token (from env or its file)."""
        value, path = ((self.secret, self.secret_file) if self.channel == "webhook"
                       else (self.bot_token, self.bot_token_file))
        if value is not None:
            return value.get_secret_value()
        assert path is not None
        text = path.read_text().strip()
        if not text:
            raise ConfigError(f"{path} is empty")
        return text


class _Toml(PydanticBaseSettingsSource):
    """``router.toml`` of the data dir; refuses secrets written into it."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self.data: dict[str, Any] = {}
        if path is not None and path.is_file():
            try:
                self.data = tomllib.loads(path.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: not valid TOML: {exc}") from None
            for name, t in (self.data.get("targets") or {}).items():
                for key in SECRET_KEYS:
                    if isinstance(t, dict) and key in t:
                        raise ConfigError(f"{path}: targets.{name}.{key}: secrets come only from the "
                                          f"environment or {key.split('_')[0]}_file, never the config file")

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


class RouterConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SIDECAR_ROUTER_", extra="forbid", frozen=True)

    match_mode: Literal["all", "first"] = "all"
    dedup_window_s: float = Field(default=86400.0, gt=0, le=366 * 86400)
    targets: dict[str, Target] = {}

    #: the config file this class reads (set on the per-call subclass made by :func:`load_config`)
    config_file: ClassVar[Path | None] = None

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: Any,
                                   env_settings: Any, dotenv_settings: Any,
                                   file_secret_settings: Any) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _Toml(settings_cls, cls.config_file))

    @model_validator(mode="after")
    def _names(self) -> "RouterConfig":
        for name in self.targets:
            if name == "stack":
                raise ValueError("targets.stack: the name 'stack' is reserved for the Stack channel")
            if not name or len(name) > 100 or any(c.isspace() for c in name):
                raise ValueError(f"targets: bad target name {name!r}")
        return self

    def channels(self) -> dict[str, str]:
        """Target name → channel, ``stack`` included (what :func:`~.route.route` takes)."""
        return {"stack": "stack", **{n: t.channel for n, t in self.targets.items()}}


def load_config(data_dir: Path | None, **overrides: Any) -> RouterConfig:
    """Environment + ``<data_dir>/router.toml`` (+ ``overrides``, e.g. from tests).  Raises
    :class:`ConfigError` with one line naming the bad setting."""
    path = None if data_dir is None else Path(data_dir) / CONFIG_FILE
    bound = type("RouterConfig", (RouterConfig,), {"config_file": path, "__module__": __name__})
    try:
        return bound(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ())) or "router"
        raise ConfigError(f"router setting {where}: {err.get('msg')}") from None
