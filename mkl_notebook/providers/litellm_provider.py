"""Real models through litellm, behind the oracle boundary (docs/language.md §9).

litellm is imported on the first real call only (it takes seconds to import),
with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so importing it makes no network
call.  API keys come from the providers' usual environment variables and are
redacted from every message this module produces.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from ..engine.oracle import (
    AwaitingHuman,
    JudgeAnswer,
    JudgeRequest,
    Oracle,
    OracleError,
    OracleRequest,
    Partial,
    ProduceAnswer,
    ProduceRequest,
)
from .config import ModelConfig
from .judge_protocol import parse_judge_reply
from .prompts import judge_messages, produce_messages, split_scratchpad
from .secrets import scrub, shown_so_far, url_secrets

_import_lock = threading.Lock()
_litellm: Any = None


def import_litellm() -> Any:
    """Import litellm once, offline and quiet."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            os.environ.setdefault("LITELLM_LOG", "ERROR")
            import litellm

            _redact_library_logs()
            litellm.suppress_debug_info = True
            litellm.telemetry = False
            litellm.drop_params = True  # a tier's model may not take every parameter (e.g. temperature)
            _litellm = litellm
    return _litellm


_LIBRARY_LOGGERS = ("LiteLLM", "litellm", "openai", "httpx", "httpcore")
_URL_SECRETS: set[str] = set()  # the credentials of every URL an oracle was configured with: the logs know them


def _redact_library_logs() -> None:
    """Provider error bodies can echo an API key; records from these libraries are redacted at creation.

    A record factory (not a logger filter) is used because filters do not see records of child loggers.
    """
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name.startswith(_LIBRARY_LOGGERS):
            try:
                message = record.getMessage()
            except Exception:  # a malformed record stays as it was; logging reports it itself
                return record
            record.msg, record.args = redact(message, secrets=tuple(_URL_SECRETS)), ()
        return record

    logging.setLogRecordFactory(factory)
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(name).setLevel(logging.WARNING)


def redact(text: str, env: dict[str, str] | None = None, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without secrets: see :func:`secrets.scrub`."""
    return scrub(text, secrets, env)


def _short(exc: BaseException, secrets: tuple[str, ...] = ()) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return redact(f"{type(exc).__name__}: {first}", secrets=secrets)[:300]


class LiteLLMOracle(Oracle):
    """Produce and judge calls on real models; tools, hooks and replies belong to other oracles."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        # Credentials in the configured URLs: never in an answer, a reasoning, an error or a log.
        self._secrets = tuple(secret for url in config.api_bases() for secret in url_secrets(url))
        _URL_SECRETS.update(self._secrets)

    # -- plumbing --------------------------------------------------------------------

    def _model(self, tier: str) -> str:
        model = self.config.model_for(tier)
        if not model:
            raise OracleError(
                f"provider-error: no model is configured for tier '{tier}': set MKL_MODEL (e.g. "
                f"openai/gpt-4o-mini) or MKL_MODEL_{tier.upper()}, or '{tier} = \"…\"' under [tool.mkl] in "
                "pyproject.toml, or run with a script of scripted answers"
            )
        return model

    def _retryable(self, litellm: Any, exc: BaseException) -> bool:
        kinds = tuple(
            getattr(litellm, name)
            for name in (
                "RateLimitError",
                "Timeout",
                "APIConnectionError",
                "InternalServerError",
                "ServiceUnavailableError",
                "BadGatewayError",
            )
            if hasattr(litellm, name)
        )
        if isinstance(exc, kinds):
            return True
        status = getattr(exc, "status_code", None)
        return isinstance(status, int) and (status == 429 or status >= 500)

    def complete(
        self,
        tier: str,
        model: str,
        messages: list[dict[str, str]],
        partial: Partial | None = None,
        **params: Any,
    ) -> Any:
        """One chat completion with retries (exponential backoff with jitter) on transient failures.

        With ``partial`` the answer is streamed and ``partial`` is told its text so far as chunks
        arrive; the whole response is then rebuilt from the chunks, usage included. A stream that
        breaks is asked again from the start, like any transient failure.
        """
        litellm = import_litellm()
        arguments: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "timeout": self.config.timeout,
            "num_retries": 0,
            **self.config.params_for(tier),
            **params,
        }
        api_base = self.config.api_base_for(tier)
        if api_base:
            arguments["api_base"] = api_base
        if partial is not None:
            arguments.update(stream=True, stream_options={"include_usage": True})
        attempt = 0
        while True:
            try:
                response = litellm.completion(**arguments)
                return response if partial is None else self._gather(litellm, response, messages, partial)
            except Exception as exc:
                if isinstance(exc, getattr(litellm, "AuthenticationError", ())):
                    raise OracleError(
                        f"provider-error: {model} refused the credentials ({_short(exc, self._secrets)}); set the "
                        "provider's API key variable (e.g. OPENAI_API_KEY)",
                        called=True,
                    ) from None
                if attempt >= self.config.retries or not self._retryable(litellm, exc):
                    raise OracleError(
                        f"provider-error: {model}: {_short(exc, self._secrets)}",
                        suspendable=self._retryable(litellm, exc),
                        called=True,
                    ) from None
                delay = self.config.backoff * (2**attempt)
                time.sleep(delay + random.uniform(0, delay / 2))
                attempt += 1

    def _gather(self, litellm: Any, stream: Any, messages: list[dict[str, str]], partial: Partial) -> Any:
        """Read a streamed answer, telling ``partial`` its text so far; the response rebuilt from the chunks.

        ``partial`` is told only what may be shown before the rest arrives (:func:`secrets.shown_so_far`: a
        key the answer echoes is held back until it is whole and can be masked), and only text that goes on
        from what it was told before; the whole answer, scrubbed, once the stream ends.
        """
        chunks: list[Any] = []
        text = told = ""
        partial(told)
        for chunk in stream:
            chunks.append(chunk)
            choices = getattr(chunk, "choices", None) or []
            delta = getattr(choices[0], "delta", None) if choices else None
            piece = getattr(delta, "content", None) if delta is not None else None
            if piece:
                text += piece
                shown = shown_so_far(text, self._secrets)
                if len(shown) > len(told) and shown.startswith(told):
                    partial(shown)
                    told = shown
        whole = redact(text, secrets=self._secrets)
        if len(whole) > len(told) and whole.startswith(told):
            partial(whole)
        return litellm.stream_chunk_builder(chunks, messages=messages)

    def _cost(self, litellm: Any, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """What a call cost by litellm's local price list; None when the model is not in it (never a guess)."""
        try:
            prompt, completion = litellm.cost_per_token(
                model=model, prompt_tokens=input_tokens, completion_tokens=output_tokens
            )
        except Exception:  # litellm raises for a model it has no price for
            return None
        return float(prompt) + float(completion)

    # -- the oracle ---------------------------------------------------------------------

    def ask(self, request: OracleRequest) -> Any:
        return self._answer(request, None)

    def stream(self, request: OracleRequest, partial: Partial) -> Any:
        return self._answer(request, partial)

    def remote_call(self, request: OracleRequest) -> Callable[[], Any] | None:
        """A model call made elsewhere: the worker asks the same models with the same settings (the
        configured URLs go with the call; API keys come from the worker's own environment). It does not
        stream."""
        if isinstance(request, (ProduceRequest, JudgeRequest)):
            return functools.partial(_ask_elsewhere, self.config, request)
        return None

    def _answer(self, request: OracleRequest, partial: Partial | None) -> Any:
        if isinstance(request, ProduceRequest):
            return self._produce(request, partial)
        if isinstance(request, JudgeRequest):
            if partial is not None:
                partial("")  # a judge's reply is a number: it is not shown, only that judging began
            return self._judge(request)
        if request.kind == "reply":
            raise AwaitingHuman(request.position)
        raise OracleError(f"state-error: no host {request.kind} named '{getattr(request, 'name', '')}' is registered")

    def _produce(self, request: ProduceRequest, partial: Partial | None) -> ProduceAnswer:
        model = self._model(request.tier)
        litellm = import_litellm()
        started = time.monotonic()
        native = bool(request.reason) and _supports_reasoning(litellm, model)
        params: dict[str, Any] = {"temperature": request.temperature}
        if native:
            params["reasoning_effort"] = "medium"
        response = self.complete(
            request.tier,
            model,
            produce_messages(request, scratchpad=request.reason and not native),
            partial,
            **params,
        )
        choice = response.choices[0]
        text = redact(choice.message.content or "", secrets=self._secrets)
        reasoning = None
        if request.reason:
            if native:
                native_reasoning = getattr(choice.message, "reasoning_content", None)
                reasoning = redact(native_reasoning, secrets=self._secrets) if native_reasoning else None
            else:
                reasoning, text = split_scratchpad(text)
        tokens_in, tokens_out = _tokens(response)
        return ProduceAnswer(
            text=text,
            reasoning=reasoning,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            truncated=getattr(choice, "finish_reason", None) == "length",
            model=model,
            cost_usd=self._cost(litellm, model, tokens_in, tokens_out),
            seconds=round(time.monotonic() - started, 3),  # as journaled, so a replay shows the same
        )

    def _judge(self, request: JudgeRequest) -> JudgeAnswer:
        model = self.config.judge or self._model(request.tier)
        litellm = import_litellm()
        started = time.monotonic()
        response = self.complete(request.tier, model, judge_messages(request), temperature=0)
        text = redact(response.choices[0].message.content or "", secrets=self._secrets)
        parsed = parse_judge_reply(text, len(request.conditions))
        tokens_in, tokens_out = _tokens(response)
        return JudgeAnswer(
            choice=parsed.choice,
            raw=parsed.raw,
            parse=parsed.parse,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            model=model,
            cost_usd=self._cost(litellm, model, tokens_in, tokens_out),
            seconds=round(time.monotonic() - started, 3),  # as journaled, so a replay shows the same
        )


def _ask_elsewhere(config: ModelConfig, request: ProduceRequest | JudgeRequest) -> Any:
    """A model call on a worker: a litellm oracle of the same configuration answers it there."""
    return LiteLLMOracle(config).ask(request)


def _tokens(response: Any) -> tuple[int, int]:
    """The (input, output) tokens a response reports."""
    usage = getattr(response, "usage", None)
    return int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


def _supports_reasoning(litellm: Any, model: str) -> bool:
    check = getattr(litellm, "supports_reasoning", None)
    if check is None:
        return False
    try:
        return bool(check(model=model))
    except Exception:  # unknown models are simply not reasoning models
        return False


def missing_keys(model: str) -> list[str]:
    """Environment variables the provider of ``model`` needs and does not have."""
    litellm = import_litellm()
    try:
        report = litellm.validate_environment(model=model)
    except Exception:
        return []
    return list(report.get("missing_keys") or [])
