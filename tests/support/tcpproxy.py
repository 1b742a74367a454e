"""A loopback TCP proxy that a test can cut, to play network outages against a real PostgreSQL.

    proxy = TcpProxy("127.0.0.1", 5432)        # listens on 127.0.0.1:proxy.port
    url = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
    proxy.freeze()    # a silent network: nothing passes, nothing is closed (packets lost, no RST)
    proxy.refuse()    # the server is gone: every connection closed, new ones closed at once
    proxy.restore()   # back to normal (new connections work; frozen ones carry on)
    proxy.close()

Threads, blocking sockets with short timeouts; nothing here sleeps to synchronise a test.
"""

from __future__ import annotations

import select
import socket
import threading

STEP_S = 0.05


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = int(self.listener.getsockname()[1])
        self.mode = "open"  # open | frozen | refusing
        self.closed = False
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self.connections = 0  # connections passed to the server
        self.refused = 0  # connections closed at once while refusing
        threading.Thread(target=self._accept, daemon=True).start()

    # ------------------------------------------------------------------ what a test does
    def freeze(self) -> None:
        self.mode = "frozen"

    def refuse(self) -> None:
        self.mode = "refusing"
        with self._lock:
            socks, self._socks = list(self._socks), set()
        for s in socks:
            _close(s)

    def restore(self) -> None:
        self.mode = "open"

    def close(self) -> None:
        self.closed = True
        self.refuse()
        _close(self.listener)

    # ------------------------------------------------------------------ the plumbing
    def _accept(self) -> None:
        while not self.closed:
            try:
                r, _, _ = select.select([self.listener], [], [], STEP_S)
                if not r:
                    continue
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.mode == "refusing":
                self.refused += 1
                _close(client)
                continue
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        while self.mode == "frozen" and not self.closed:  # a connect into a silent network hangs
            select.select([], [], [], STEP_S)
        if self.mode == "refusing" or self.closed:
            _close(client)
            return
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            _close(client)
            return
        with self._lock:
            self._socks.update((client, server))
            self.connections += 1
        threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
        threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        while not self.closed:
            if self.mode == "frozen":  # hold the bytes: the other side hears nothing
                select.select([], [], [], STEP_S)
                continue
            try:
                r, _, _ = select.select([src], [], [], STEP_S)
                if not r:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
            except (OSError, ValueError):  # closed by refuse() meanwhile
                break
        _close(src)
        _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.close()
    except OSError:
        pass
