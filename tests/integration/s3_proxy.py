"""An HTTP proxy between the sink's client and the real S3 server that refuses chosen requests.

One request per connection: the proxy reads a request (head and ``Content-Length`` body), either
answers it with an error itself or forwards it to the server, and relays the server's answer with
``Connection: close``, so the client opens a fresh connection for its next request. It records what
it saw of every request, for the tests to check what the client sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from hyperdata_sidecar.devkafka import free_low_port


@dataclass
class SeenRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes
    refused: bool = False

    @property
    def is_upload_part(self) -> bool:
        return self.method == "PUT" and "partNumber" in self.query and "uploadId" in self.query


@dataclass
class RefuseParts:
    """Answer the ``nth`` UploadPart request (1-based, counting retries) and the ``times - 1``
    after it with ``status``."""

    nth: int
    status: int = 503
    times: int = 1
    seen: int = field(default=0, init=False)

    def refuses(self, request: SeenRequest) -> bool:
        if not request.is_upload_part:
            return False
        self.seen += 1
        return self.nth <= self.seen < self.nth + self.times


class S3Proxy:
    def __init__(self, upstream_port: int, refuse: RefuseParts | None = None) -> None:
        self.upstream_port = upstream_port
        self.refuse = refuse
        self.port = free_low_port()
        self.seen: list[SeenRequest] = []
        self.most_parts_in_flight = 0  # UploadPart requests forwarded and not yet answered, at most
        self._parts_in_flight = 0
        self._server: asyncio.Server | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[S3Proxy]:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        try:
            yield self
        finally:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request = _parse_request(head)
            request.body = await reader.readexactly(int(request.headers.get("content-length", "0")))
            self.seen.append(request)
            if self.refuse is not None and self.refuse.refuses(request):
                request.refused = True
                writer.write(_error_response(self.refuse.status))
            elif request.is_upload_part:
                self._parts_in_flight += 1
                self.most_parts_in_flight = max(self.most_parts_in_flight, self._parts_in_flight)
                try:
                    writer.write(await self._forward(head, request.body))
                finally:
                    self._parts_in_flight -= 1
            else:
                writer.write(await self._forward(head, request.body))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away: nothing to answer
        finally:
            writer.close()

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            upstream_writer.write(_with_connection_close(head) + body)
            await upstream_writer.drain()
            response = await upstream_reader.read()  # the server closes after one answer
        finally:
            upstream_writer.close()
        response_head, sep, response_body = response.partition(b"\r\n\r\n")
        return _with_connection_close(response_head + sep) + response_body


def _parse_request(head: bytes) -> SeenRequest:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    url = urlsplit(target)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return SeenRequest(method, url.path, parse_qs(url.query, keep_blank_values=True), headers, b"")


def _with_connection_close(head: bytes) -> bytes:
    """``head`` (ending in a blank line) with its Connection header replaced by ``close``."""
    lines = [line for line in head.split(b"\r\n")[:-2] if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close", b"", b""])


def _error_response(status: int) -> bytes:
    body = b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>refused by the test proxy</Message></Error>'
    return (
        f"HTTP/1.1 {status} Refused\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
