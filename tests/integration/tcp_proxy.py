"""A TCP proxy in front of the broker for one worker, which a drill closes and opens again.

With the broker's proxied listener (:class:`hyperdata_sidecar.devkafka.ProxiedListener`) advertising
the proxy's port, every connection of a client that bootstraps from the proxy goes through it:
:meth:`TcpProxy.cut` refuses new connections and drops the open ones, cutting that client off the
broker while every other client keeps it; :meth:`TcpProxy.restore` lets it through again.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port``, byte for byte, both ways."""

    def __init__(self, port: int, target_port: int) -> None:
        self.port = port
        self.target_port = target_port
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def restore(self) -> None:
        """Accept and forward connections (again)."""
        if self._server is None:
            self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port, reuse_address=True)

    async def cut(self) -> None:
        """Refuse new connections and drop every open one."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        for pipe in list(self._pipes):
            pipe.cancel()
        self._writers.clear()

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers.update((client_writer, broker_writer))
        pipes = [
            asyncio.ensure_future(self._pump(client_reader, broker_writer)),
            asyncio.ensure_future(self._pump(broker_reader, client_writer)),
        ]
        self._pipes.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
                self._pipes.discard(pipe)
            for writer in (client_writer, broker_writer):
                writer.transport.abort()
                self._writers.discard(writer)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while chunk := await reader.read(1 << 16):
                writer.write(chunk)
                await writer.drain()
