"""Which real model each tier uses, and how to reach it.

Sources, later wins: defaults; ``[tool.mkl]`` in a ``pyproject.toml`` or a
``mkl.toml`` found upward from the working folder; the environment
(``MKL_MODEL``, ``MKL_MODEL_FAST|BALANCED|REASONING``, ``MKL_JUDGE_MODEL``,
``MKL_API_BASE``); then flags (``--model``, ``--api-base``) or ``%mkl config``.
API keys are never configured here: providers read their usual variables.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from ..errors import UserError
from ..lang import files
from ..lang.model import TIERS

CONFIG_FILES = ("mkl.toml", "pyproject.toml")
SIMPLE_KEYS = ("judge", "api_base", "timeout", "retries", "backoff")


class ConfigError(UserError, ValueError):
    """A configuration file or value that cannot be used; names the file and the key."""


@dataclass(frozen=True)
class TierSettings:
    model: str | None = None
    api_base: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None  # where the model was set: a config file's path, "environment", …


@dataclass(frozen=True)
class ModelConfig:
    tiers: Mapping[str, TierSettings] = field(default_factory=lambda: {tier: TierSettings() for tier in TIERS})
    judge: str | None = None
    api_base: str | None = None
    timeout: float = 60.0
    retries: int = 3
    backoff: float = 1.0  # seconds before the first retry; doubles, with jitter
    source: str = "defaults"
    judge_source: str | None = None

    def model_for(self, tier: str) -> str | None:
        settings = self.tiers.get(tier)
        return settings.model if settings else None

    def api_base_for(self, tier: str) -> str | None:
        settings = self.tiers.get(tier)
        return (settings.api_base if settings else None) or self.api_base

    def api_bases(self) -> list[str]:
        """Every base URL this configuration may call (the shared one and each tier's)."""
        urls = [self.api_base, *(settings.api_base for settings in self.tiers.values())]
        return [url for url in urls if url]

    def params_for(self, tier: str) -> dict[str, Any]:
        settings = self.tiers.get(tier)
        return dict(settings.params) if settings else {}

    @property
    def configured(self) -> bool:
        return any(settings.model for settings in self.tiers.values())

    def with_values(self, values: Mapping[str, Any], source: str) -> ModelConfig:
        """Apply a flat mapping (``fast = "…"``, ``judge = "…"``, ``[tiers.fast]`` tables)."""
        tiers = dict(self.tiers)
        changes: dict[str, Any] = {}
        for key, value in sorted(values.items(), key=lambda item: item[0] != "model"):  # "model" first
            if key in TIERS:
                tiers[key] = replace(_tier(tiers[key], value, f"{source}: {key}"), source=source)
            elif key == "model":
                for tier in TIERS:
                    tiers[tier] = replace(tiers[tier], model=_text(value, f"{source}: model"), source=source)
            elif key == "tiers":
                if not isinstance(value, Mapping):
                    raise ConfigError(f"{source}: 'tiers' must be a table of fast / balanced / reasoning")
                for tier, table in value.items():
                    if tier not in TIERS:
                        raise ConfigError(f"{source}: unknown tier '{tier}' (tiers: {', '.join(TIERS)})")
                    tiers[tier] = replace(_tier(tiers[tier], table, f"{source}: tiers.{tier}"), source=source)
            elif key == "judge":
                changes["judge"] = _text(value, f"{source}: judge")
                changes["judge_source"] = source
            elif key == "api_base":
                changes["api_base"] = _text(value, f"{source}: api_base")
            elif key in ("timeout", "backoff"):
                changes[key] = _number(value, f"{source}: {key}")
            elif key == "retries":
                number = _number(value, f"{source}: retries")
                if number != int(number):
                    raise ConfigError(f"{source}: 'retries' must be a whole number")
                changes["retries"] = int(number)
            else:
                raise ConfigError(
                    f"{source}: unknown setting '{key}' (settings: model, {', '.join(TIERS)}, "
                    f"tiers, {', '.join(SIMPLE_KEYS)})"
                )
        return replace(self, tiers=tiers, source=source, **changes)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty text value")
    return value.strip()


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{where} must be a number, not {str(value).lower()}")
    if not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} must be a number") from None
    if value < 0:
        raise ConfigError(f"{where} must not be negative")
    return float(value)


def _tier(current: TierSettings, value: Any, where: str) -> TierSettings:
    if isinstance(value, str):
        return replace(current, model=_text(value, where))
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a model name or a table with model / api_base / params")
    unknown = set(value) - {"model", "api_base", "params"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (use model, api_base, params)")
    params = value.get("params", current.params)
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where}.params must be a table of extra litellm parameters")
    return TierSettings(
        model=_text(value["model"], f"{where}.model") if "model" in value else current.model,
        api_base=_text(value["api_base"], f"{where}.api_base") if "api_base" in value else current.api_base,
        params=dict(params),
    )


def find_config_file(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest ``mkl.toml``, or ``pyproject.toml`` with a ``[tool.mkl]`` table, upward from ``start``."""
    for folder in [start, *start.parents]:
        for name in CONFIG_FILES:
            path = folder / name
            if not path.is_file():
                continue
            try:
                data = tomllib.loads(files.read_text(path, files.MACHINE_LIMIT))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"{path}: cannot be read as TOML ({getattr(exc, 'strerror', None) or exc})") from None
            except RecursionError:  # tomllib descends once per level; it stops at the interpreter's limit
                raise ConfigError(f"{path}: nests too deeply to be read as TOML") from None
            if name == "mkl.toml":
                return path, data
            table = data.get("tool", {}).get("mkl")
            if isinstance(table, dict):
                return path, table
    return None


# Each environment variable and the setting it gives.
ENVIRONMENT: dict[str, str] = {
    "MKL_MODEL": "model",
    **{f"MKL_MODEL_{tier.upper()}": tier for tier in TIERS},
    "MKL_JUDGE_MODEL": "judge",
    "MKL_API_BASE": "api_base",
}


def environment_values(env: Mapping[str, str]) -> dict[str, Any]:
    return {setting: env[name] for name, setting in ENVIRONMENT.items() if env.get(name)}


def load_config(
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    overrides_source: str = "flags",
) -> ModelConfig:
    """Defaults, then the nearest config file, then the environment, then ``overrides`` (flags, or the
    notebook's settings: ``overrides_source`` names them)."""
    config = ModelConfig()
    found = find_config_file(Path(cwd or os.getcwd()).resolve())
    if found is not None:
        path, table = found
        config = config.with_values(table, str(path))
    env_values = environment_values(os.environ if env is None else env)
    if env_values:
        config = config.with_values(env_values, "environment")
    if overrides:
        config = config.with_values({k: v for k, v in overrides.items() if v is not None}, overrides_source)
    return config
