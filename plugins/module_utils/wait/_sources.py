# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where llmops.sglang.wait_for_sglang reads a server's log from: a file, or the unit's journal (polled with one
``journalctl`` per probe, or streamed by one ``journalctl --follow`` per round).

Every source has the same small interface (LogSource): ``read(now, max_bytes, force=False)`` returns the text the
log gained, at most about ``max_bytes`` of it, and whether more is already waiting; ``save()`` writes what the next
round needs into the round's LogState; ``close()`` ends what the source started. The caller reads a backlog in
bounded chunks and checks its deadline between them.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import codecs
import json
import os
import subprocess

from ansible_collections.llmops.sglang.plugins.module_utils.host._command import C_ENV, local_run


class LogSourceError(Exception):
    """The log cannot be read (permissions, an I/O error); the wait ends as ``error``."""


class LogFollower:
    """Reads what a (possibly not yet existing, rotated, truncated, or appended) log file gained.

    Stateless between reads (the file is opened, read from the offset and closed each time), so a
    follower restored from ``to_state()`` in a later module run continues exactly. Detects:

    * the file appearing after the follower was created ("appeared": read from byte 0);
    * a new file at the path, e.g. logrotate's create mode or a new run ("replaced": new inode, byte 0);
    * truncation, e.g. logrotate's copytruncate ("truncated": the file is shorter than the offset, or
      the bytes just before the offset changed, which catches a truncated file that already grew again);
    * a start inside a line: the default offset (the file's size) can fall while a line is still being
      written (a buffered writer flushes mid-line). The bytes up to the first newline or carriage return
      are the tail of a line of the earlier part, so they are skipped, never handed on as a line of their
      own (it would lose its head: "heduler hit an exception"). An explicit offset is trusted as a line
      start (the role's offset is where the new run began writing), and so are byte 0 and a start right
      after a carriage return (a progress bar's next segment, shown whole by a terminal).

    Other OS errors (permissions) propagate to the caller.
    """

    _TAIL = 64  # bytes before the offset remembered to recognise the same file content

    def __init__(self, path, offset=None, state=None):
        self._path = path
        self._reset_reason = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        if state is not None:
            self._offset = int(state["offset"])
            self._ino = state.get("ino")
            self._dev = state.get("dev")
            self._tail = bytes.fromhex(state.get("tail") or "")
            self._skip_partial = bool(state.get("skip_partial"))
            pending = bytes.fromhex(state.get("pending") or "")
            if pending:
                self._decoder.setstate((pending, 0))
            return
        self._ino = None
        self._dev = None
        self._tail = b""
        self._offset = 0
        self._skip_partial = False
        try:
            handle = open(path, "rb")
        except FileNotFoundError:
            return
        with handle:
            info = os.fstat(handle.fileno())
            self._ino, self._dev = info.st_ino, info.st_dev
            self._offset = info.st_size if offset is None else max(0, int(offset))
            if 0 < self._offset <= info.st_size:
                start = max(0, self._offset - self._TAIL)
                handle.seek(start)
                self._tail = handle.read(self._offset - start)
                self._skip_partial = offset is None and self._tail[-1:] not in (b"\n", b"\r")

    @property
    def path(self):
        """The followed file's path."""
        return self._path

    @property
    def offset(self):
        """Byte offset up to which the file has been read (int)."""
        return self._offset

    @property
    def reset_reason(self):
        """None, or "appeared", "replaced" or "truncated" when the last read started over at byte 0."""
        return self._reset_reason

    def to_state(self):
        """JSON-serialisable dict; ``LogFollower(path, state=...)`` continues exactly."""
        pending = self._decoder.getstate()[0]
        return {"offset": self._offset, "ino": self._ino, "dev": self._dev, "tail": self._tail.hex(),
                "pending": pending.hex(), "skip_partial": self._skip_partial}

    def _restart(self, reason, info):
        self._reset_reason = reason
        self._ino, self._dev = info.st_ino, info.st_dev
        self._offset = 0
        self._tail = b""
        self._skip_partial = False
        self._decoder.reset()

    def read(self, max_bytes=8 * 1024 * 1024):
        """Return the text (UTF-8, errors replaced) appended since the last read; '' if nothing.

        Reads only new bytes (seek), at most ``max_bytes`` per call; a multi-byte character split by
        the read boundary is completed on the next call.
        """
        self._reset_reason = None
        try:
            handle = open(self._path, "rb")
        except FileNotFoundError:
            return ""   # not created yet, or rotated away and not recreated yet
        with handle:
            info = os.fstat(handle.fileno())
            if self._ino is None:
                self._restart("appeared", info)
            elif (info.st_ino, info.st_dev) != (self._ino, self._dev):
                self._restart("replaced", info)
            elif info.st_size < self._offset:
                self._restart("truncated", info)
            elif self._tail:
                handle.seek(self._offset - len(self._tail))
                if handle.read(len(self._tail)) != self._tail:
                    self._restart("truncated", info)
            if info.st_size <= self._offset:
                return ""
            handle.seek(self._offset)
            data = handle.read(max(1, int(max_bytes)))
        self._offset += len(data)
        self._tail = (self._tail + data)[-self._TAIL:]
        if self._skip_partial:
            data = self._after_partial_line(data)
        return self._decoder.decode(data)

    def _after_partial_line(self, data):
        """``data`` without the rest of the line the start offset fell into (see the class docstring)."""
        ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
        if not ends:
            return b""   # the earlier line goes on past this read: keep skipping
        self._skip_partial = False
        return data[min(ends) + 1:]


# ---------------------------------------------------------------------------------------------------------------
# journal of the unit's current invocation
# ---------------------------------------------------------------------------------------------------------------

# The first poll of a bounded read has no cursor yet: a cursor of a realtime alone (1 µs after the epoch) puts
# journalctl before the invocation's first entry. --lines=N with a cursor shows the N entries after it (oldest
# first, in every journalctl); without one it would show the last N.
JOURNAL_START = "t=1"
JOURNAL_ENTRY_BYTES = 128   # entries per bounded poll: max_bytes / this (SGLang lines are ~100-300 bytes)


def journal_argv(invocation_id, cursor=None, journalctl="journalctl", lines=None):
    """journalctl for the messages after ``cursor`` of one invocation; ``lines`` bounds the entries shown."""
    argv = [journalctl, "--no-pager", "-q", "-o", "cat", "--show-cursor", "_SYSTEMD_INVOCATION_ID=%s" % invocation_id]
    if cursor:
        argv[1:1] = ["--after-cursor", cursor]
    if lines:
        argv[1:1] = ["--lines=%d" % lines] + ([] if cursor else ["--cursor", JOURNAL_START])
    return argv


def parse_journal_output(text):
    """Split ``journalctl -o cat --show-cursor`` output into (message_text, cursor or None).

    message_text keeps one message per line and ends with a newline when there is any message.
    """
    if not text:
        return "", None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    cursor = None
    if lines and lines[-1].startswith("-- cursor: "):
        cursor = lines.pop()[len("-- cursor: "):].strip()
    lines = [ln for ln in lines if ln != "-- No entries --"]
    return ("\n".join(lines) + "\n") if lines else "", cursor


def read_journal(invocation_id, cursor=None, run_command=None, journalctl="journalctl", lines=None):
    """Return (text, new_cursor, error) for the messages after cursor of one invocation (at most ``lines``)."""
    run_command = run_command or local_run
    rc, out, err = run_command(journal_argv(invocation_id, cursor, journalctl, lines))
    if rc != 0:
        return "", cursor, "journalctl failed (rc=%s): %s" % (rc, (err or out).strip())
    text, new_cursor = parse_journal_output(out)
    return text, new_cursor or cursor, None


# ---------------------------------------------------------------------------------------------------------------
# journal, streamed: one `journalctl -f -o json` per round instead of one journalctl every poll
# ---------------------------------------------------------------------------------------------------------------

def journal_follow_argv(invocation_id, cursor=None, journalctl="journalctl"):
    argv = [journalctl, "--no-pager", "-q", "--follow", "--lines=all", "-o", "json", "--output-fields=MESSAGE",
            "_SYSTEMD_INVOCATION_ID=%s" % invocation_id]
    if cursor:
        argv[1:1] = ["--after-cursor", cursor]
    return argv


def parse_journal_json_line(line):
    """(message text, cursor) of one `journalctl -o json` line. journald stores a message with control characters
    (a progress bar's carriage returns) as an array of byte values; MESSAGE may also be missing (null text)."""
    data = json.loads(line)
    msg = data.get("MESSAGE")
    if isinstance(msg, list):
        msg = bytes(b & 0xFF for b in msg if isinstance(b, int)).decode("utf-8", "replace")
    elif msg is not None and not isinstance(msg, str):
        msg = str(msg)
    return msg, data.get("__CURSOR")


class JournalStream:
    """Reads the JSON lines a `journalctl -f -o json` child writes to a pipe, without ever blocking.

    read() returns (text, cursor, ended): text holds one line per complete journal entry (messages joined with
    newlines), cursor is the cursor of the last complete entry (None when there was none), ended is True once the
    writer closed the pipe. A partial JSON line stays buffered; an entry is only ever counted once its line is complete,
    so a cursor handed to the next round never skips an entry.
    """

    def __init__(self, fd, proc=None):
        self.fd = fd
        self.proc = proc
        self.buf = b""
        self.ended = False
        os.set_blocking(fd, False)

    @classmethod
    def spawn(cls, argv):
        env = dict(os.environ)
        env.update(C_ENV)
        # journalctl --follow streams for the whole round; AnsibleModule.run_command only returns after the child exits.
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,  # pylint: disable=ansible-bad-function
                                env=env, close_fds=True)
        return cls(proc.stdout.fileno(), proc)

    def read(self, max_bytes=8 * 1024 * 1024):
        chunks = []
        got = 0
        while got < max_bytes and not self.ended:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self.ended = True
                break
            if not data:
                self.ended = True
                break
            chunks.append(data)
            got += len(data)
        if chunks:
            self.buf += b"".join(chunks)
        texts = []
        cursor = None
        if b"\n" in self.buf:
            complete, self.buf = self.buf.rsplit(b"\n", 1)
            for raw in complete.split(b"\n"):
                if not raw.strip():
                    continue
                try:
                    msg, cur = parse_journal_json_line(raw.decode("utf-8", "replace"))
                except ValueError:
                    continue
                if msg is not None:
                    texts.append(msg)
                if cur:
                    cursor = cur
        return ("\n".join(texts) + "\n") if texts else "", cursor, self.ended

    def close(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(2)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        else:
            try:
                os.close(self.fd)
            except OSError:
                pass

    def failed(self):
        """True when journalctl ended with an error (an option it does not know, no journal access)."""
        return self.proc is not None and self.proc.poll() not in (None, 0, -15)


# ---------------------------------------------------------------------------------------------------------------
# the sources
# ---------------------------------------------------------------------------------------------------------------

class LogSource:
    """The interface of a log source (file or journal)."""

    kind = None          # "file" or "journal": RV(log_source)
    offset = None        # byte offset read up to (files only): RV(log_offset_end)
    reset_reason = None  # "appeared", "truncated" or "replaced" when the last read started the file over
    live = False         # read on every look (a file's stat, a stream's pipe); False = only on probe ticks

    def read(self, now, max_bytes, force=False):
        """(text, more): what the log gained (may end mid-line), and True when more is already waiting."""
        raise NotImplementedError

    def save(self):
        """Write what the next round needs into the LogState."""

    def close(self):
        """End what the source started (a journalctl child)."""


class FileSource(LogSource):
    """A log file, through LogFollower; a cheap os.stat decides whether there is anything to read."""

    kind = "file"
    live = True

    def __init__(self, path, log_state, offset=None):
        self.path = path
        self.log_state = log_state
        if log_state.follower is not None:
            self.follower = LogFollower(path, state=log_state.follower)
        else:
            self.follower = LogFollower(path, offset=offset)
            log_state.run_offset = self.follower.offset
        self._stat_key = None
        self._more = False

    @property
    def offset(self):
        return self.follower.offset

    def read(self, now, max_bytes, force=False):
        try:
            st = os.stat(self.path)
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            key = None
        if not force and not self._more and key == self._stat_key:
            return "", False
        self._stat_key = key
        try:
            text = self.follower.read(max_bytes)
        except OSError as exc:
            raise LogSourceError("%s" % exc)
        self.log_state.reads += 1
        self.reset_reason = self.follower.reset_reason
        if self.reset_reason:
            self.log_state.reset = self.reset_reason
            if self.reset_reason in ("truncated", "replaced"):
                self.log_state.run_offset = 0
        # a full read means the file may hold more; the next call reads on without waiting for a stat change
        self._more = key is not None and self.follower.offset < key[1]
        return text, self._more

    def save(self):
        self.log_state.follower = self.follower.to_state()


class JournalPollSource(LogSource):
    """The unit's journal for its current invocation, one ``journalctl --after-cursor`` run every ``every`` seconds
    (or at once when forced, or while a backlog is being read). A run shows at most max_bytes / JOURNAL_ENTRY_BYTES
    entries (``--lines``), so a backlog is read in bounded pieces and the caller's deadline holds between them."""

    kind = "journal"

    def __init__(self, log_state, run_command=None, every=0.25, probes=None):
        self.log_state = log_state
        self.run_command = run_command or local_run
        self.every = every
        self.probes = probes if probes is not None else []
        self._next = 0.0
        self._more = False

    def read(self, now, max_bytes, force=False):
        inv = self.log_state.journal_invocation
        if not inv or (not force and not self._more and now < self._next):
            return "", False
        self._next = now + self.every
        lines = max(1, int(max_bytes) // JOURNAL_ENTRY_BYTES)
        text, cursor, err = read_journal(inv, self.log_state.journal_cursor, self.run_command, lines=lines)
        self.log_state.journal_cursor = cursor
        self.log_state.reads += 1
        self.probes.append({"probe": "journal", "invocation": inv, "bytes": len(text), "error": err})
        # a full page may be followed by more (a message of several lines counts once: at worst one empty page more)
        self._more = err is None and text.count("\n") >= lines
        return text, self._more


class JournalStreamSource(LogSource):
    """The unit's journal followed by one ``journalctl --follow -o json`` per round; falls back to polling for good
    (recorded in the LogState) when that journalctl fails, e.g. one without --output-fields."""

    kind = "journal"

    def __init__(self, log_state, stream_factory, poll):
        self.log_state = log_state
        self.stream_factory = stream_factory
        self.poll = poll
        self.stream = None

    @property
    def live(self):
        return not self.log_state.journal_stream_failed

    def read(self, now, max_bytes, force=False):
        if self.log_state.journal_stream_failed:
            return self.poll.read(now, max_bytes, force)
        inv = self.log_state.journal_invocation
        if not inv:
            return "", False
        if self.stream is None:
            try:
                self.stream = self.stream_factory(inv, self.log_state.journal_cursor)
            except OSError as exc:
                self.log_state.journal_stream_failed = "%s" % exc
                return self.poll.read(now, max_bytes, True)
        text, cursor, ended = self.stream.read(max_bytes)
        if cursor:
            self.log_state.journal_cursor = cursor
        if text:
            self.log_state.reads += 1
            self.poll.probes.append({"probe": "journal", "invocation": inv, "bytes": len(text), "stream": True})
        if ended:
            failed = self.stream.failed()
            self.close()
            if failed:
                self.log_state.journal_stream_failed = "journalctl --follow exited with an error"
        return text, bool(text) and len(text) >= max_bytes

    def close(self):
        if self.stream is not None:
            self.stream.close()
            self.stream = None


def open_source(log_path, log_offset, unit, log_state, run_command=None, stream_factory=None, every=0.25,
                probes=None):
    """The source a wait reads: the file when log_path is set, else the unit's journal (streamed when a
    stream_factory is given), else None (no log watched)."""
    if log_path:
        return FileSource(log_path, log_state, log_offset)
    if not unit:
        return None
    poll = JournalPollSource(log_state, run_command, every, probes)
    if stream_factory is None:
        return poll
    return JournalStreamSource(log_state, stream_factory, poll)
