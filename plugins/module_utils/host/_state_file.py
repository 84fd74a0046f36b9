# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection's state files on the host, read as typed records; a damaged one is kept aside, never fatal.

Every JSON file the collection keeps on a host (the deployment record, the run record, the startup history, the
accepted benchmark results, the host lock) is read through :func:`read_state`: its size is bounded, its text must be
UTF-8 JSON, and its parser turns it into typed records, checking every field (:func:`typed` checks a dataclass's
fields against their annotations). Whatever fails, the file is *damaged*: it is renamed to
``<name>.damaged-<UTC time>`` (the newest :data:`KEEP_DAMAGED` are kept, older ones removed), the caller gets a
:class:`Damage` naming the file, what was wrong and where it was kept, and the run goes on as if the file were absent.
No damaged file ever turns into a Python exception, and none is dropped without a word.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import time
import typing
from typing import Any, Callable, Optional, Tuple

KEEP_DAMAGED = 3
NONE_TYPE = type(None)
MAX_BYTES = 4 * 1024 * 1024


class StateFormatError(ValueError):
    """The file's content is not the record its reader expects: ``str(err)`` says what is wrong, for a person."""


class StateReadError(Exception):
    """The file exists but cannot be read (permissions, I/O): not damage, the caller reports it as an error."""

    def __init__(self, path, err):
        super().__init__('Cannot read %s: %s. Run the task as root (become: true).' % (path, err))
        self.msg = str(self)


@dataclasses.dataclass(frozen=True)
class Damage:
    """A state file that was not a record: ``path``, ``why``, and ``kept_as`` (None in check mode: nothing moved)."""

    path: str
    why: str
    kept_as: Optional[str] = None

    def to_json(self):
        return dataclasses.asdict(self)

    def message(self, what):
        kept = ('it was kept as %s' % self.kept_as) if self.kept_as else 'it was left in place (check mode or a query)'
        return ('The %s %s was damaged (%s): %s, and this run went on as if it were absent.'
                % (what, self.path, self.why, kept))


# ------------------------------------------------------------------------------------------------ typed fields

def _type_name(value):
    """What a JSON value is, with its article: 'a string', 'an integer', 'null'."""
    return 'null' if value is None else {bool: 'a boolean', int: 'an integer', float: 'a number', str: 'a string',
                                         list: 'a list', dict: 'a mapping'}.get(type(value), 'a ' + type(value).__name__)


def _check(value, hint, where):
    """``value`` as the annotation ``hint`` wants it (an int where a float is wanted becomes a float)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin is typing.Union:
        if value is None and NONE_TYPE in args:
            return None
        inner = [a for a in args if a is not NONE_TYPE]
        return _check(value, inner[0], where) if len(inner) == 1 else value
    if dataclasses.is_dataclass(hint):
        return typed(hint, value, where)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise StateFormatError('%s is %s, not a number' % (where, _type_name(value)))
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise StateFormatError('%s is %s, not an integer' % (where, _type_name(value)))
        return value
    if hint in (str, bool):
        if not isinstance(value, hint):
            raise StateFormatError('%s is %s, not %s' % (where, _type_name(value), _type_name(hint())))
        return value
    if hint is list or origin is list:
        if not isinstance(value, list):
            raise StateFormatError('%s is %s, not a list' % (where, _type_name(value)))
        return [_check(item, args[0], '%s[%d]' % (where, i)) for i, item in enumerate(value)] if args else value
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise StateFormatError('%s is %s, not a mapping' % (where, _type_name(value)))
        if not args:
            return value
        return {_check(k, args[0], '%s key' % where): _check(v, args[1], '%s[%r]' % (where, k)) for k, v in value.items()}
    return value


def typed(cls, data, where='record'):
    """An instance of the dataclass ``cls`` from parsed JSON ``data``, every field checked against its annotation.

    Unknown keys are ignored (a newer writer may add some); a missing field without a default, or a value of another
    type, raises :class:`StateFormatError` naming the field.
    """
    if not isinstance(data, dict):
        raise StateFormatError('%s is %s, not a mapping' % (where, _type_name(data)))
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        name = '%s.%s' % (where, field.name)
        if field.name in data:
            values[field.name] = _check(data[field.name], hints[field.name], name)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise StateFormatError('%s is missing' % name)
    return cls(**values)


# ------------------------------------------------------------------------------------------------ reading

def set_aside(path, now=None):
    """Rename ``path`` to ``<path>.damaged-<UTC time>`` and keep only the newest KEEP_DAMAGED of those; the new name."""
    now = time.time() if now is None else now
    stamp = '%s.%06dZ' % (time.strftime('%Y%m%dT%H%M%S', time.gmtime(now)), int(now % 1 * 1e6))
    kept = '%s.damaged-%s' % (path, stamp)
    serial = 1
    while os.path.lexists(kept):
        serial += 1
        kept = '%s.damaged-%s.%d' % (path, stamp, serial)
    os.replace(path, kept)
    older = sorted(glob.glob(glob.escape(path) + '.damaged-*'), key=lambda p: (os.path.getmtime(p), p))
    for stale in older[:-KEEP_DAMAGED] if len(older) > KEEP_DAMAGED else []:
        try:
            os.unlink(stale)
        except OSError:
            pass
    return kept


def read_state(path, parse: Callable[[Any], Any], check_mode=False, max_bytes=MAX_BYTES) -> Tuple[Any, Optional[Damage]]:
    """``(record, damage)`` of the state file at ``path``.

    ``(None, None)`` when there is no file. ``parse`` turns the parsed JSON into the caller's record and raises
    :class:`StateFormatError` (or ValueError, TypeError, KeyError) when it is not one. A damaged file gives
    ``(None, Damage)`` and is set aside (not in check mode). Raises :class:`StateReadError` for a file that exists
    but cannot be read.
    """
    try:
        with open(path, 'rb') as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        return None, None
    except OSError as err:
        raise StateReadError(path, err)
    try:
        if len(raw) > max_bytes:
            raise StateFormatError('larger than %d bytes' % max_bytes)
        try:
            data = json.loads(raw.decode('utf-8'))
        except UnicodeDecodeError:
            raise StateFormatError('not UTF-8 text')
        except ValueError as err:
            raise StateFormatError('not JSON: %s' % err)
        return parse(data), None
    except (StateFormatError, ValueError, TypeError, KeyError, AttributeError) as err:
        why = str(err) if isinstance(err, StateFormatError) else '%s: %s' % (type(err).__name__, err)
        if check_mode:
            return None, Damage(path, why)
        try:
            return None, Damage(path, why, set_aside(path))
        except OSError as move_err:
            return None, Damage(path, '%s; setting it aside failed: %s' % (why, move_err))
