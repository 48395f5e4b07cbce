"""A broker outage that keeps the broker's data, for tests: the embedded broker reached through a
TCP proxy the test cuts (every connection dropped, new ones refused) and restores on the same
port, as a Kafka broker restarted with its disks comes back (the embedded broker itself keeps
its data in memory only).

`ProxiedBroker` advertises the proxy's address, so every client, bootstrap or not, goes through
it. `Proxy.cut_on_fetch` cuts at the first Fetch request of a given ``client.id``: with
``replimon-reader`` (the ranges reader's consumers, ``replimon/kafka/consumers.py``) that is the
moment a micro-batch's task starts reading.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

from replimon.embedded import EmbeddedBroker
from replimon.embedded.broker import HOST
from replimon.embedded.processes import free_port

FETCH = 1  # Kafka's api key of Fetch


class Proxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target`` until cut."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port(HOST)
        self.target: int | None = None
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut_on: bytes | None = None
        self.cut_done = threading.Event()  # set when an armed cut happened

    def start(self) -> Proxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def cut(self) -> None:
        """Refuse new connections and drop every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        for sock in ([listener] if listener else []) + list(conns):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut_on_fetch(self, client_id: str) -> None:
        """Cut at the next Fetch request from ``client_id`` (that request is not forwarded)."""
        self.cut_done.clear()
        self._cut_on = client_id.encode()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                if self.target is None:  # the broker is not started yet
                    raise OSError("no broker behind the proxy")
                upstream = socket.create_connection((HOST, self.target), 5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._conns |= {client, upstream}
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._copy, args=(upstream, client), daemon=True).start()

    def _copy(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        self._drop(src, dst)

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        """Client to broker, one request at a time: size, api key, version, correlation id,
        client id (a nullable string in every request header version)."""
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                head = _exactly(src, 4)
                body = _exactly(src, struct.unpack(">i", head)[0])
                armed = self._cut_on
                if armed is not None and struct.unpack(">h", body[:2])[0] == FETCH:
                    size = struct.unpack(">h", body[8:10])[0]
                    if body[10:10 + max(size, 0)] == armed:
                        self._cut_on = None
                        self.cut()
                        self.cut_done.set()
                        return
                dst.sendall(head + body)
        self._drop(src, dst)

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            self._conns -= set(socks)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        data = sock.recv(n - len(out))
        if not data:
            raise ConnectionError("closed")
        out += data
    return out


class ProxiedBroker(EmbeddedBroker):
    """The embedded broker behind a `Proxy`: it advertises the proxy's port, so
    ``bootstrap_servers`` and every broker address clients are told are the proxy's.
    `cut`/`restore` are the outage."""

    def __init__(self) -> None:
        proxy = Proxy().start()
        super().__init__(advertised_port=proxy.port)
        self.proxy = proxy

    def _launch(self, binary: str, port: int) -> None:
        self.proxy.target = port  # before the broker's readiness check, which may go through it
        super()._launch(binary, port)

    def cut(self) -> None:
        self.proxy.cut()

    def restore(self) -> None:
        self.proxy.start()

    def stop(self, grace: float = 3.0) -> None:
        self.proxy.cut()
        super().stop(grace)
