"""Errors raised for user mistakes. Each carries a position when one is known.

`str(error)` is the complete message a user sees: `file:line:col: what went wrong`.
Internal bugs are never wrapped in these classes.
"""

from __future__ import annotations

from fluxmat.engine.syntax import Pos


class FluxmatError(Exception):
    """Base class of every error caused by user input."""

    def __init__(self, message: str, pos: Pos | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos

    def __str__(self) -> str:
        if self.pos is None or self.pos.line == 0:
            return self.message
        return f"{self.pos}: {self.message}"


class ParseError(FluxmatError):
    """Text that is not a well-formed program, fact file or JSON fact."""


class AnalysisError(FluxmatError):
    """A well-formed program that cannot run: unsafe rule, arity clash, unstratifiable."""


class UpdateError(FluxmatError):
    """An invalid update, e.g. a fact both added and deleted, or an unknown arity."""


class AlgorithmError(FluxmatError):
    """An algorithm that does not apply to the program (e.g. counting on recursion)."""


class InputMemoryError(MemoryError):
    """Memory ran out while reading an input file: names the file, and the line when known.

    A MemoryError (not a FluxmatError): the command line reports it as memory
    used up, prefixed with `file:line`.
    """

    def __init__(self, source: str, line: int | None = None):
        self.source, self.line = source, line
        super().__init__(source if line is None else f"{source}:{line}")
