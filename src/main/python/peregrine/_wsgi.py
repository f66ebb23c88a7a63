"""The WSGI side of the bridge: the objects PEP 3333 puts in the environ.

Java calls the application itself, builds the environ and writes the response; these classes are
what it cannot express as built-in functions: a file-like wsgi.input over a body that is still
arriving, and wsgi.file_wrapper.
"""
import os
import stat

from peregrine import _native

_read = _native.wsgi_read


class Input:
    """wsgi.input for a body larger than what Java reads ahead: each read asks the connection for more."""

    __slots__ = ("_pending",)

    def __init__(self):
        self._pending = b""


    def read(self, size=-1):
        if size is None or size < 0:
            data = self._pending + _read(-1)
            self._pending = b""
            return data
        while len(self._pending) < size:
            chunk = _read(size - len(self._pending))
            if not chunk:
                break
            self._pending += chunk
        data, self._pending = self._pending[:size], self._pending[size:]
        return data

    def readline(self, size=-1):
        limit = size if size is not None and size >= 0 else None
        while True:
            end = self._pending.find(b"\n")
            if end >= 0 and (limit is None or end < limit):
                cut = end + 1
                break
            if limit is not None and len(self._pending) >= limit:
                cut = limit
                break
            chunk = _read(65536)
            if not chunk:
                cut = len(self._pending) if limit is None else min(limit, len(self._pending))
                break
            self._pending += chunk
        line, self._pending = self._pending[:cut], self._pending[cut:]
        return line

    def readlines(self, hint=-1):
        lines, total = [], 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                return lines

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class FileWrapper:
    """wsgi.file_wrapper: iterates a file-like object in blocks and closes it with the response."""

    def __init__(self, filelike, block_size=8192):
        self.filelike = filelike
        self.block_size = block_size
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def _file_region(self):
        """(fd, offset, size) when the wrapped object is a regular file the server can send itself, else None."""
        try:
            fd = self.filelike.fileno()
            offset = self.filelike.tell()
            info = os.fstat(fd)
        except (AttributeError, OSError, ValueError):
            return None
        if not stat.S_ISREG(info.st_mode) or offset > info.st_size:
            return None
        return fd, offset, info.st_size

    def __iter__(self):
        return self

    def __next__(self):
        data = self.filelike.read(self.block_size)
        if data:
            return data
        raise StopIteration
