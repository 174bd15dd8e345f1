"""Bounds on what one RDF input may make the parser hold, and readable parser messages.

pyoxigraph parses a stream statement by statement: a complete triple is handed out as
soon as it is read, but everything up to it -- a 100 MB literal or IRI, a comment that
never ends, `[ :p [ :p [ ...` nested a million deep (the nested triples come out only
when the brackets close) -- is held in memory first. So every RDF file and ontology is
parsed through `Parse`, which hands the parser its input in chunks and stops it when
more than `MAX_STATEMENT_BYTES` bytes have gone in since the last complete triple: a
`ParseError` naming the file and the line and column where reading stopped. Memory for
parsing is then bounded by that limit (plus the triples already read).

`Parse` also skips a UTF-8 byte-order mark at the start (editors on Windows write one;
RDF does not allow it, every tool accepts it), and reports a stream that fails while it
is read (a truncated or corrupt `.gz`) as an error instead of the triples read so far.

Memory: pyoxigraph's own allocations abort the process when they fail (Rust does not
raise), so when the process has an address-space limit (RLIMIT_AS, `ulimit -v`) `Parse`
stops with a `MemoryError` once less than `MEMORY_MARGIN` of it is left (checked every
`CHECK_EVERY` triples): the caller names the file and line instead of the process dying
with "memory allocation of N bytes failed".

`printable` escapes control characters (NUL, a BOM, the bytes of a binary file) in the
parser's messages, so an error line is one readable line whatever the input held.
"""

from __future__ import annotations

import gzip
import io
import resource
import zlib

import pyoxigraph as ox

from fluxmat.engine.errors import ParseError
from fluxmat.engine.syntax import Pos

MAX_STATEMENT_BYTES = 1 << 24  # 16 MiB of input without a complete triple
CHUNK = 1 << 16
BOM = b"\xef\xbb\xbf"
READ_ERRORS = (OSError, EOFError, zlib.error, gzip.BadGzipFile)
_SHOWN = {0x09, 0x20}  # tab and space stay as they are
MEMORY_MARGIN = 32 << 20  # address space kept free under RLIMIT_AS while parsing
CHECK_EVERY = 4096  # triples between two looks at the address space


def address_space_left() -> int | None:
    """Bytes of address space left under RLIMIT_AS (None: no limit, or not known)."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            used = int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return None
    return soft - used


def printable(text: str) -> str:
    r"""`text` with control and format characters (NUL, BOM, ...) written as `\xNN` / `\uNNNN`."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or ord(c) in _SHOWN else ascii(c)[1:-1] for c in text)


class _Source(io.RawIOBase):
    """The parser's view of a binary stream: BOM skipped, bytes since the last triple counted."""

    def __init__(self, stream, limit: int):
        self.stream, self.limit = stream, limit
        self.pos = self.mark = 0  # bytes handed to the parser; at the last complete triple
        self.lines, self.line_start = 0, 0  # newlines handed out; offset after the last one
        self.failure: BaseException | None = None  # what reading raised
        self.over = False  # stopped by the limit
        self._chunk, self._at, self._first = b"", 0, True

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        try:
            data = self.stream.read(CHUNK)
        except READ_ERRORS as exc:
            self.failure = exc
            return False
        if self._first:
            self._first = False
            if data.startswith(BOM):
                data = data[len(BOM) :]
        self._chunk, self._at = data, 0
        return bool(data)

    def read(self, size: int = -1) -> bytes:
        """At most `size` bytes (never more than a chunk: the parser asks for ever larger sizes)."""
        if self.failure is not None or self.over:
            return b""
        if self.pos - self.mark > self.limit:
            self.over = True
            return b""
        if self._at >= len(self._chunk) and not self._fill():
            return b""
        n = len(self._chunk) - self._at if size < 0 else min(size, len(self._chunk) - self._at)
        piece = self._chunk[self._at : self._at + n]
        newlines = piece.count(b"\n")
        if newlines:
            self.lines += newlines
            self.line_start = self.pos + piece.rfind(b"\n") + 1
        self._at += n
        self.pos += n
        return piece

    def readinto(self, buf) -> int:
        piece = self.read(len(buf))
        buf[: len(piece)] = piece
        return len(piece)


class Parse:
    """The triples of an RDF stream, parsed within `MAX_STATEMENT_BYTES` (see the module docstring).

    Iterate once; `prefixes` are the parser's prefixes after that. Errors: `SyntaxError`
    from the parser as it is (connectors.rdf.syntax_error places it), `ParseError` for the
    limit and for a stream that cannot be read.
    """

    def __init__(self, stream, fmt: ox.RdfFormat, source: str, base_iri: str | None = None,
                 limit: int | None = None):  # fmt: skip
        self.source = source
        self.limit = MAX_STATEMENT_BYTES if limit is None else limit
        self.reader = _Source(stream, self.limit)
        self.parser = ox.parse(self.reader, fmt, base_iri=base_iri)

    def line(self) -> int:
        """The line reading has reached (1-based)."""
        return self.reader.lines + 1

    @property
    def prefixes(self) -> dict[str, str]:
        return dict(self.parser.prefixes)

    def __iter__(self):
        reader = self.reader
        watch = address_space_left() is not None
        try:
            for n, quad in enumerate(self.parser, start=1):
                reader.mark = reader.pos
                if watch and n % CHECK_EVERY == 0 and address_space_left() < MEMORY_MARGIN:
                    raise MemoryError(f"less than {MEMORY_MARGIN >> 20} MiB of address space left")
                yield quad
        except SyntaxError:
            self._check()
            raise
        except MemoryError as exc:
            # pyoxigraph's own bound on its buffer (16 MiB), not the process's memory
            if "buffer maximal size" not in str(exc):
                raise
            reader.over = True
        self._check()

    def _check(self) -> None:
        reader = self.reader
        if reader.failure is not None:
            # the caller adds the file's name
            raise ParseError(f"cannot read: {printable(str(reader.failure))}")
        if reader.over:
            where = Pos(self.source, reader.lines + 1, reader.pos - reader.line_start + 1)
            raise ParseError(f"more than {self.limit:,} bytes without a complete triple (a huge literal, "
                             "IRI or comment, or a statement nested too large); reading stopped here",
                             where)  # fmt: skip
