"""A local Telegram Bot API server (aiohttp on 127.0.0.1) for driving the real python-telegram-bot against.

Routes `/bot{token}/{method}`; bodies are form-encoded with JSON-encoded non-string values, as PTB sends them.
It answers the methods the bot uses, serves scripted updates to `getUpdates` (long poll, never held longer
than the poll's own timeout) or, once `setWebhook` is called, posts them to the webhook as Telegram does (JSON, the
secret in X-Telegram-Bot-Api-Secret-Token, at most `max_connections` at once, each again after `retry_after` seconds
until the webhook answers 200), and records every request, so tests can assert what the bot sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from telegram import Update
from telegram.ext import Application

TOKEN = "123456:TEST-token-never-in-logs"
MAX_TEXT = 4096  # Telegram refuses longer texts (counted after parsing, in UTF-16 code units)
_TAG = re.compile(r"<[^<>]*>")
BOT_USER = {"id": 123456, "is_bot": True, "first_name": "Закон", "username": "kz_law_test_bot"}
# Values PTB sends as plain strings; every other value is JSON (numbers, booleans, objects).
STRING_FIELDS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "action",
        "callback_query_id",
        "url",
        "webhook_url",
        "secret_token",
        "language_code",
        "inline_message_id",
        "message_thread_id",
    }
)


@dataclass(frozen=True)
class BotRequest:
    """One call the bot made."""

    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)

    @property
    def chat_id(self) -> Any:
        return self.params.get("chat_id")


def decode_form(form: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in form.items():
        if key in STRING_FIELDS:
            out[key] = value
            continue
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def text_length(params: dict[str, Any]) -> int:
    """The length Telegram checks: of the text as shown (HTML tags and entities parsed), in UTF-16 units."""
    text = params.get("text", "")
    if params.get("parse_mode") == "HTML":
        text = html.unescape(_TAG.sub("", text))
    return len(text.encode("utf-16-le")) // 2


@dataclass(frozen=True)
class WebhookPost:
    """One delivery of an update to the webhook: the HTTP status it got, or the error (status 0)."""

    update_id: int
    status: int
    error: str = ""
    at: float = field(default_factory=time.monotonic)


class TelegramError(Exception):
    """A Bot API error answer: {"ok": false, "error_code": ..., "description": ...}."""

    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code, self.description = code, description


class BotAPIServer:
    """The Bot API for one token; `async with BotAPIServer() as api:` then point PTB at `api.base_url`."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.requests: list[BotRequest] = []
        self.sent: dict[int, dict[str, Any]] = {}  # message_id -> the Message returned for sendMessage
        self._pending: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._new_update = asyncio.Event()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0
        # Webhook mode (after setWebhook): updates wait in `_outbox` and are posted until one post gets a 200.
        self.webhook: dict[str, Any] | None = None  # url, secret_token, max_connections as setWebhook set them
        self.posts: list[WebhookPost] = []
        self.retry_after = 1.0  # seconds before an update the webhook did not take is posted again
        self.post_timeout = 60.0  # seconds a post may take before it counts as failed
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._poster: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    async def __aenter__(self) -> BotAPIServer:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)  # its lines hold the token
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._new_update.set()  # release a waiting getUpdates
        if self._poster is not None:
            self._poster.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poster
        if self._runner:
            await self._runner.cleanup()

    # --- scripting -------------------------------------------------------------------------------
    def push(self, update: dict[str, Any]) -> int:
        """Queue an update (without update_id) for getUpdates, or for the webhook once one is set; returns its
        update_id."""
        update_id = next(self._update_ids)
        if self.webhook is not None:
            self._outbox.put_nowait({"update_id": update_id, **update})
        else:
            self._pending.append({"update_id": update_id, **update})
            self._new_update.set()
        return update_id

    def calls(self, method: str | None = None, *, chat_id: int | None = None, since: int = 0) -> list[BotRequest]:
        """Recorded requests other than getUpdates, optionally of one method / chat, from index `since`."""
        return [
            r
            for r in self.requests[since:]
            if r.method != "getUpdates"
            and (method is None or r.method == method)
            and (chat_id is None or r.chat_id == chat_id)
        ]

    async def wait_for(self, predicate: Callable[[BotAPIServer], bool], timeout: float = 15.0) -> None:
        """Wait until `predicate(self)` holds; a guard against hanging, not a timing assertion."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: predicate(self)), timeout)

    # --- the API ----------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        method = request.match_info["method"]
        params = decode_form(dict(await request.post()))
        if method != "getUpdates":
            self._record(method, params)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 404,
                    "description": f"Not Found: method {method} is not scripted",
                },
                status=404,
            )
        try:
            result = await handler(params)
        except TelegramError as err:
            return web.json_response(
                {"ok": False, "error_code": err.code, "description": err.description}, status=err.code
            )
        if method == "getUpdates":
            self._record(method, params)
        return web.json_response({"ok": True, "result": result})

    def _record(self, method: str, params: dict[str, Any]) -> None:
        self.requests.append(BotRequest(method, params))
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _api_getMe(self, params: dict[str, Any]) -> Any:
        return {
            **BOT_USER,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _api_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        self._pending = [u for u in self._pending if u["update_id"] >= offset]
        if not self._pending and timeout > 0:
            self._new_update.clear()
            try:
                await asyncio.wait_for(self._new_update.wait(), timeout)
            except TimeoutError:
                pass
        limit = int(params.get("limit") or 100)
        return self._pending[:limit]

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        return True

    async def _api_setWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = {
            "url": params["url"],
            "secret_token": params.get("secret_token"),
            "max_connections": int(params.get("max_connections") or 40),  # Telegram's default
        }
        for update in self._pending:  # what getUpdates did not take goes to the webhook, as with Telegram
            self._outbox.put_nowait(update)
        self._pending = []
        if self._poster is None:
            self._poster = asyncio.get_running_loop().create_task(self._post_updates())
        return True

    async def _post_updates(self) -> None:
        """Post each update of the outbox to the webhook, up to max_connections at once."""
        posting: set[asyncio.Task[None]] = set()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.post_timeout)) as http:
            while True:
                update = await self._outbox.get()
                while self.webhook is None or len(posting) >= self.webhook["max_connections"]:
                    if posting:
                        await asyncio.wait(posting, return_when=asyncio.FIRST_COMPLETED)
                    else:
                        await asyncio.sleep(0.05)  # no webhook now: wait for setWebhook
                task = asyncio.get_running_loop().create_task(self._post(http, update, self.webhook))
                posting.add(task)
                task.add_done_callback(posting.discard)

    async def _post(self, http: aiohttp.ClientSession, update: dict[str, Any], webhook: dict[str, Any]) -> None:
        """One delivery; an update the webhook did not answer 200 goes back to the outbox after `retry_after`."""
        headers = {"X-Telegram-Bot-Api-Secret-Token": webhook["secret_token"]} if webhook["secret_token"] else {}
        try:
            async with http.post(webhook["url"], json=update, headers=headers) as response:
                await response.read()
                post = WebhookPost(update["update_id"], response.status)
        except (aiohttp.ClientError, TimeoutError) as err:
            post = WebhookPost(update["update_id"], 0, type(err).__name__)
        self.posts.append(post)
        await self._notify()
        if post.status != 200:
            await asyncio.sleep(self.retry_after)
            self._outbox.put_nowait(update)

    async def _api_setMyCommands(self, params: dict[str, Any]) -> Any:
        return True

    async def _api_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    @staticmethod
    def _check_text(params: dict[str, Any]) -> None:
        if not 1 <= text_length(params) <= MAX_TEXT:
            raise TelegramError(
                400, "Bad Request: message is too long" if params.get("text") else "Bad Request: message text is empty"
            )

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> Any:
        """Bot API 9.3+: a partial message shown while it is generated; private chats only."""
        if not isinstance(params.get("chat_id"), int) or params["chat_id"] <= 0:
            raise TelegramError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        if not params.get("draft_id"):
            raise TelegramError(400, "Bad Request: draft_id must be non-zero")
        if params.get("text") and text_length(params) > MAX_TEXT:
            raise TelegramError(400, "Bad Request: message is too long")
        return True

    async def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        self._check_text(params)
        chat_id = params["chat_id"]
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"}
            if chat_id > 0
            else {"id": chat_id, "type": "group", "title": "Группа"},
            "from": BOT_USER,
            "text": params["text"],
        }
        if "reply_markup" in params:
            message["reply_markup"] = params["reply_markup"]
        self.sent[message["message_id"]] = message
        return message

    def _message_to_edit(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("message_id") not in self.sent:
            raise TelegramError(400, "Bad Request: message to edit not found")
        return self.sent[params["message_id"]]

    async def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        message = dict(self._message_to_edit(params))
        message["reply_markup"] = params.get("reply_markup", {"inline_keyboard": []})
        message["edit_date"] = int(time.time())
        self.sent[message["message_id"]] = message
        return message

    async def _api_editMessageText(self, params: dict[str, Any]) -> Any:
        self._check_text(params)
        message = {**self._message_to_edit(params), "text": params["text"], "edit_date": int(time.time())}
        message.pop("reply_markup", None)
        if "reply_markup" in params:
            message["reply_markup"] = params["reply_markup"]
        self.sent[message["message_id"]] = message
        return message


# --- updates as Telegram sends them ---------------------------------------------------------------
_message_ids = itertools.count(1)


def tg_user(user_id: int, language_code: str | None = "ru") -> dict[str, Any]:
    user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
    if language_code:
        user["language_code"] = language_code
    return user


def message_update(
    user_id: int,
    text: str | None = None,
    *,
    language_code: str | None = "ru",
    group: int | None = None,
    **content: Any,
) -> dict[str, Any]:
    """A message from `user_id`, privately or in the `group` chat (a negative id): text (a /command gets its
    bot_command entity) or other content (e.g. reply_to_message=api.sent[message_id])."""
    chat = (
        {"id": user_id, "type": "private", "first_name": f"User{user_id}"}
        if group is None
        else {"id": group, "type": "group", "title": "Группа"}
    )
    message: dict[str, Any] = {
        "message_id": next(_message_ids),
        "date": int(time.time()),
        "chat": chat,
        "from": tg_user(user_id, language_code),
        **content,
    }
    if text is not None:
        message["text"] = text
        if text.startswith("/"):
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
    return {"message": message}


def callback_update(
    user_id: int, data: str, message: dict[str, Any] | None, *, language_code: str | None = "ru"
) -> dict[str, Any]:
    """A press of an inline button carrying `data` under the bot's `message` (None: Telegram sent none)."""
    query = {
        "id": f"cq{next(_message_ids)}",
        "from": tg_user(user_id, language_code),
        "chat_instance": f"ci{user_id}",
        "data": data,
    }
    if message is not None:
        query["message"] = message
    return {"callback_query": query}


def inaccessible_message(chat_id: int, message_id: int) -> dict[str, Any]:
    """How Telegram sends a message the bot can no longer reach (deleted, too old): date 0."""
    return {"chat": {"id": chat_id, "type": "private"}, "message_id": message_id, "date": 0}


STICKER = {
    "file_id": "stk1",
    "file_unique_id": "ustk1",
    "type": "regular",
    "width": 512,
    "height": 512,
    "is_animated": False,
    "is_video": False,
    "emoji": "😀",
}
PHOTO = [{"file_id": "ph1", "file_unique_id": "uph1", "width": 90, "height": 90}]
VOICE = {"file_id": "vc1", "file_unique_id": "uvc1", "duration": 3, "mime_type": "audio/ogg"}
DOCUMENT = {
    "file_id": "doc1",
    "file_unique_id": "udoc1",
    "file_name": "иск.pdf",
    "mime_type": "application/pdf",
}
LOCATION = {"latitude": 51.128, "longitude": 71.43}


def settings_for(settings: Any, api: BotAPIServer, **overrides: Any) -> Any:
    """`settings` pointed at the local Bot API server, with the test token."""
    from pydantic import SecretStr

    return settings.model_copy(
        update={
            "telegram_bot_token": SecretStr(api.token),
            "telegram_api_url": api.base_url,
            "telegram_file_url": api.base_file_url,
            **overrides,
        }
    )


@asynccontextmanager
async def polling(app: Application) -> AsyncIterator[Application]:
    """Run the application by long polling, as run_polling() does but without owning the event loop."""
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0.0, timeout=1, allowed_updates=Update.ALL_TYPES)
        try:
            yield app
        finally:
            await app.updater.stop()
            await app.stop()
    app.bot_data["services"].executor.shutdown()
