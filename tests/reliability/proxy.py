"""A loopback TCP proxy between the service and PostgreSQL that a test can cut and restore,
so the database "goes away" without stopping the machine's PostgreSQL server.

``cut()`` refuses new connections and resets the open ones (a database host that went
down); ``unresponsive()`` resets the open ones and accepts new ones that never get an
answer; ``blackhole()`` accepts connections and opens none upstream and stops relaying on the
open ones, so nothing answers (a network partition); ``restore()`` relays again.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.mode = "relay"
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._open_listener()

    def _open_listener(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed
            with self._lock:
                self._sockets.add(client)
                mode = self.mode
            if mode == "cut":
                self._close(client)
                continue
            if mode == "blackhole":
                continue  # held open, never answered
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                self._close(client)
                continue
            with self._lock:
                self._sockets.add(upstream)
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while self.mode == "blackhole":  # stop relaying, keep the sockets open
                    threading.Event().wait(0.05)
                    if source.fileno() < 0:
                        return
                target.sendall(data)
        except OSError:
            pass
        self._close(source)
        self._close(target)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()

    def _drop_connections(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._close(sock)

    def _drop_everything(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
        self._drop_connections()

    def cut(self) -> None:
        """New connections refused, open ones reset."""
        self.mode = "cut"
        self._drop_everything()

    def unresponsive(self) -> None:
        """Open connections reset; new ones accepted and never answered (a database host
        that rebooted into a hang)."""
        self.mode = "blackhole"
        self._drop_connections()

    def blackhole(self) -> None:
        """Connections accepted and never answered; open ones stop relaying."""
        self.mode = "blackhole"

    def restore(self) -> None:
        if self.mode == "blackhole":
            self._drop_everything()  # the held connections are dead ends
        self.mode = "relay"
        if self._listener is None:
            self._open_listener()

    def close(self) -> None:
        self.mode = "cut"
        self._drop_everything()
