"""Decoding a response body's Content-Encoding within the response size bound.

Why not httpx's decoding: it inflates a chunk completely before anyone can count the bytes, so
a few kilobytes of gzip can become gigabytes in memory. Here inflation is asked for at most one
byte past the bound at a time, so a decompression bomb stops at the bound with a clear error.
"""

from __future__ import annotations

import zlib

from runtime.engine.run import EffectFailure

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_IDENTITY = ("", "identity")


class _Inflater:
    """One zlib stage (gzip, or deflate with or without its zlib header) under a bound."""

    def __init__(self, encoding: str, max_bytes: int) -> None:
        self._encoding = encoding
        self._max_bytes = max_bytes
        self._produced = 0
        self._first = True
        wbits = _GZIP_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._inflate = zlib.decompressobj(wbits)

    def feed(self, data: bytes) -> bytes:
        """The inflated bytes of data; EffectFailure past the bound or on corrupt data."""
        try:
            return self._bounded(data)
        except zlib.error:
            if not (self._first and self._encoding == "deflate"):
                corrupt = f"the {self._encoding} response is corrupt"
                raise EffectFailure("runtime", corrupt) from None
            # Servers send "deflate" as raw deflate as often as zlib-wrapped (httpx does this too).
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            self._first = False
            return self.feed(data)

    def _bounded(self, data: bytes) -> bytes:
        output = bytearray()
        pending = data
        while True:
            chunk = self._inflate.decompress(pending, self._max_bytes - self._produced + 1)
            self._first = False
            self._produced += len(chunk)
            output.extend(chunk)
            if self._produced > self._max_bytes:
                raise EffectFailure(
                    "communication",
                    f"response larger than {self._max_bytes} bytes once decompressed",
                )
            pending = self._inflate.unconsumed_tail
            if not pending:
                return bytes(output)

    def finish(self) -> bytes:
        """Whatever the stream still buffers at the end (bounded like the rest)."""
        tail = self._inflate.flush()
        self._produced += len(tail)
        if self._produced > self._max_bytes:
            raise EffectFailure(
                "communication", f"response larger than {self._max_bytes} bytes once decompressed"
            )
        return tail


class BodyDecoder:
    """Undoes a Content-Encoding chain (gzip, x-gzip, deflate, identity), bounded at each stage."""

    def __init__(self, content_encoding: str | None, max_bytes: int) -> None:
        names = [part.strip().lower() for part in (content_encoding or "").split(",")]
        codings = [name for name in names if name not in _IDENTITY]
        unknown = [name for name in codings if name not in ("gzip", "x-gzip", "deflate")]
        if unknown:
            raise EffectFailure(
                "communication", f"response Content-Encoding {unknown[0]} is not supported"
            )
        # Codings are listed in the order they were applied; undo them last first.
        self._stages = [_Inflater(name, max_bytes) for name in reversed(codings)]

    def feed(self, data: bytes) -> bytes:
        """Decoded bytes of the next raw chunk."""
        for stage in self._stages:
            data = stage.feed(data)
        return data

    def finish(self) -> bytes:
        """The decoded bytes still buffered at the end of the body."""
        data = b""
        for stage in self._stages:
            data = (stage.feed(data) if data else b"") + stage.finish()
        return data
