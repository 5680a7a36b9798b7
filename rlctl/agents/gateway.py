"""An OpenAI-compatible gateway in front of the rollout engine, one session per episode.

Routes, on 127.0.0.1 only (an ephemeral port): ``POST /v1/chat/completions``,
``POST /v1/responses`` (stateless: each request carries the whole conversation), both with
``stream`` (server-sent events), and ``GET /v1/models``. The API key names the session:
:meth:`Gateway.open` hands out a fresh random key per episode, and a request with an unknown
(or closed) key is refused with 401.

Every answer other than 200 is OpenAI's JSON error body (``{"error": {"message", "type",
"param", "code"}}``), sent before any token is generated when the request is at fault: a
malformed body, a field the gateway refuses (:mod:`rlctl.agents.gateway_schema` lists what it
does with each), an unknown route (the body names the served ones), a conversation longer
than the model's positions. An error of the gateway itself is a JSON 500 and one log line.

Turns run per session, one at a time (:mod:`rlctl.agents.gateway_session`: token in, token
out, a failed turn records nothing). Sampling is the recipe's (a request's ``temperature`` /
``top_p`` are ignored, so the trainer's log-probs match the sampler); ``max_tokens`` only lowers
the recipe's limit.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from rlctl.agents.contract import AgentOutput, GenerateFn
from rlctl.agents.gateway_replies import (
    chat_chunks,
    chat_completion,
    response_events,
    response_object,
)
from rlctl.agents.gateway_requests import GatewayError, TurnRequest, chat_turn, responses_turn
from rlctl.agents.gateway_session import ChatRendering, GatewaySession, TurnResult, run_turn
from rlctl.engines.rollout.contract import SamplingParams

LOOPBACK = "127.0.0.1"
ROUTES = ("POST /v1/chat/completions", "POST /v1/responses", "GET /v1/models")
MAX_BODY_BYTES = 16 * 1024 * 1024
STOP_GRACE_S = 2.0
log = logging.getLogger(__name__)


class Gateway:
    """The HTTP server and its sessions (start and stop it on the worker's event loop)."""

    def __init__(
        self,
        tokenizer: Any,
        generate: GenerateFn,
        *,
        model_name: str = "policy",
        max_positions: int | None = None,
        json_schema: bool = False,
    ) -> None:
        """``max_positions``: the model's positions (longer conversations are refused);
        ``json_schema``: the engine constrains decoding (JSON ``response_format`` served)."""
        self.tokenizer = tokenizer
        self.generate = generate
        self.model_name = model_name
        self.json_schema = json_schema
        self.chat = ChatRendering(tokenizer, max_positions)
        self.sessions: dict[str, GatewaySession] = {}
        self._runner: Any = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._errors])
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_get("/v1/models", self._models)
        # stop() cancels a turn still generating after this long: its episode has ended
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=STOP_GRACE_S)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, 0)  # loopback only, an ephemeral port
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.chat.close()

    # ------------------------------------------------------------------ sessions
    def open(
        self, sampling: SamplingParams, *, max_turns: int, max_total_tokens: int
    ) -> GatewaySession:
        key = secrets.token_urlsafe(24)
        session = GatewaySession(key, sampling, max_turns, max_total_tokens)
        self.sessions[key] = session
        return session

    def close(self, session: GatewaySession) -> list[AgentOutput]:
        """End the episode: its outputs, in order; the key is refused from now on."""
        self.sessions.pop(session.key, None)
        session.closed = True
        session.close_output()
        return session.outputs

    # ------------------------------------------------------------------ HTTP
    @staticmethod
    def _key(request: Any) -> str:
        auth = request.headers.get("Authorization", "")
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else ""

    def _session(self, request: Any) -> GatewaySession:
        session = self.sessions.get(self._key(request))
        if session is None:
            raise GatewayError(401, "unknown session: use the API key of an open episode",
                               "authentication_error")
        return session

    @staticmethod
    async def _body(request: Any) -> Any:
        from aiohttp import web

        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise GatewayError(413, f"the body is larger than {MAX_BODY_BYTES} bytes") from None
        try:
            return json.loads(raw)
        except RecursionError:
            raise GatewayError(400, "the body's JSON is nested too deeply") from None
        except ValueError as exc:
            raise GatewayError(400, f"the body is not JSON: {exc}") from None

    def _middleware_error(self, exc: BaseException, request: Any) -> GatewayError:
        """Any failure as the JSON error it answers with (and one log line for ours)."""
        from aiohttp import web

        if isinstance(exc, GatewayError):
            return exc
        if isinstance(exc, web.HTTPNotFound | web.HTTPMethodNotAllowed):
            return GatewayError(exc.status, f"{request.method} {request.path} is not served; "
                                f"the rlctl gateway serves {', '.join(ROUTES)}",
                                "not_found_error" if exc.status == 404 else
                                "invalid_request_error")
        if isinstance(exc, web.HTTPException):
            return GatewayError(exc.status, exc.reason or "request refused")
        log.warning("gateway: %s %s failed: %s: %s", request.method, request.path,
                    type(exc).__name__, exc)
        return GatewayError(500, f"the gateway failed: {type(exc).__name__}: {exc}",
                            "server_error")

    @property
    def _errors(self) -> Any:
        from aiohttp import web

        @web.middleware
        async def errors(request: Any, handler: Any) -> Any:
            try:
                return await handler(request)
            except Exception as exc:  # noqa: BLE001 - every failure answers in JSON
                error = self._middleware_error(exc, request)
                session = self.sessions.get(self._key(request))
                if session is not None and error.status == 400:
                    session.counts["refused_requests"] += 1
                return web.json_response(error.body(), status=error.status)

        return errors

    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        self._session(request)
        return web.json_response({"object": "list", "data": [
            {"id": self.model_name, "object": "model", "created": 0, "owned_by": "rlctl"}]})

    async def _turn(self, session: GatewaySession, turn: TurnRequest) -> TurnResult:
        async with session.lock:
            return await run_turn(session, turn, self.chat, self.generate)

    def _token_texts(self, turn: TurnRequest, result: TurnResult) -> list[str] | None:
        if not turn.logprobs:
            return None
        return [self.tokenizer.decode([t]) for t in result.token_ids]

    async def _chat(self, request: Any) -> Any:
        from aiohttp import web

        session = self._session(request)
        turn, req = chat_turn(await self._body(request), json_schema_ok=self.json_schema)
        result = await self._turn(session, turn)
        texts = self._token_texts(turn, result)
        if req.stream:
            usage = bool(req.stream_options and req.stream_options.include_usage)
            return await self._stream(request, chat_chunks(result, self.model_name, texts, usage))
        return web.json_response(chat_completion(result, self.model_name, texts))

    async def _responses(self, request: Any) -> Any:
        from aiohttp import web

        session = self._session(request)
        turn, req = responses_turn(await self._body(request), json_schema_ok=self.json_schema)
        result = await self._turn(session, turn)
        answer = response_object(result, req, self.model_name, self._token_texts(turn, result))
        if req.stream:
            return await self._stream(request, response_events(answer))
        return web.json_response(answer)

    @staticmethod
    async def _stream(request: Any, events: Any) -> Any:
        from aiohttp import web

        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            for event in events:
                await response.write(event)
            await response.write_eof()
        except ConnectionResetError:  # the client left; the turn is recorded all the same
            log.info("gateway: a client closed its stream early")
        return response
