"""A TCP proxy between a node and its database, to break the network on purpose.

`pass` forwards; `blackhole` keeps every connection open and forwards
nothing (a partition: no reset, no answer); `reset` closes every connection
at once; `latency` holds every chunk that long each way. It runs on the
test's own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Listens on 127.0.0.1 (`port`) and forwards to `target_port`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.latency = 0.0
        """Seconds every chunk waits before it is forwarded (each way)."""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.reset()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self._flowing.set()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def blackhole(self) -> None:
        self._flowing.clear()

    def restore(self) -> None:
        """Forward again; connections that lived through the blackhole are closed (their
        bytes are lost, as a real partition loses them)."""
        self.reset()
        self._flowing.set()

    def reset(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(up_writer)
        pumps = [self._pump(reader, up_writer), self._pump(up_reader, writer)]
        for pump in pumps:
            task = asyncio.get_running_loop().create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                await self._flowing.wait()  # held, never delivered while the hole lasts
                if self.latency:
                    await asyncio.sleep(self.latency)
                if writer.is_closing():
                    return
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
