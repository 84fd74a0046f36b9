# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The table that ends every deploy and check run: one typed row per host, built from what the run registered.

Controller side only (the llmops.sglang.sglang_run_report action plugin). Building a row is a pure function of the
host's registered results; rendering is a pure function of rows and columns.

Adding a column (another part of the run that reports per host, for example a smoke request's TTFT):

1. write ``fill(row, value)``, which reads the part's registered result ``value`` and sets ``row.extra[key]``;
2. add ``Part(var='the_registered_variable', fill=fill, columns=(Column(key, 'HEADER', fmt),))`` to
   :data:`DEPLOY_PARTS` or :data:`CHECK_PARTS`.

The action plugin reads ``var`` from every host, the table grows the column and every returned row carries ``key``
(so JMESPath can select on it). A part whose variable a host does not have leaves the cell empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.llmops.sglang.plugins.plugin_utils._screen import first_line

# Statuses of a row that are fine: "ready" = serving after this run (changed or not; "unchanged" is a kind, not a
# status), "dry run" = a check-mode deploy, which changes nothing and starts nothing.
OK_STATUSES = ('ready', 'dry run')
REASON_CHARS = 160


def _text(value: Any) -> str:
    return '' if value is None else str(value)


def _seconds(value: Any) -> str:
    return '' if value is None else '%.1fs' % float(value)


@dataclass(frozen=True)
class Column:
    """One column: the row key it shows, its header and how a value is written."""

    key: str
    header: str
    fmt: Callable[[Any], str] = _text
    right: bool = False
    # the key of the column this one follows; None: before REASON
    after: Optional[str] = None


@dataclass
class HostRow:
    """What a run did on one host, as the table shows it and as the play returns it."""

    host: str
    status: str = 'not run'
    stage: str = ''
    seconds: Optional[float] = None
    signature: Optional[str] = None
    changed: bool = False
    reason: str = ''
    # what the run did to the server: unchanged, started, restarted, rolled back, would deploy, would restart, not
    # started (the role's sglang_service_result.outcome); empty for a check run
    kind: str = ''
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def cell(self, key: str) -> Any:
        if key in self.extra:
            return self.extra[key]
        return getattr(self, key, None)

    def to_json(self) -> Dict[str, Any]:
        data = {'host': self.host, 'status': self.status, 'ok': self.ok, 'stage': self.stage or None,
                'seconds': self.seconds, 'signature': self.signature, 'changed': self.changed, 'reason': self.reason}
        if self.kind:
            data['kind'] = self.kind
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> 'HostRow':
        base = ('host', 'status', 'stage', 'seconds', 'signature', 'changed', 'reason', 'kind')
        extra = dict((k, v) for k, v in data.items() if k not in base and k != 'ok')
        return cls(extra=extra, **dict((k, data[k]) for k in base if k in data and data[k] is not None))


@dataclass(frozen=True)
class Part:
    """A registered variable that adds to each host's row (see the module docstring). An ``optional`` part's columns
    appear only when some row has a value for them (a gateway column in a fleet without a gateway would be empty)."""

    var: str
    fill: Callable[[HostRow, Any], None]
    columns: Tuple[Column, ...] = ()
    optional: bool = False


BASE_COLUMNS = (
    Column('host', 'HOST'),
    Column('status', 'STATUS'),
    Column('stage', 'STAGE'),
    Column('seconds', 'TIME', _seconds, right=True),
    Column('signature', 'SIGNATURE'),
    Column('reason', 'REASON'),
)


def one_line(text: Any, limit: int = REASON_CHARS) -> str:
    """The first line of a message, bounded, for the REASON cell (the whole message stays in the returned data); a
    first line that ends with a colon gets the lines after it (``_screen.first_line``)."""
    return first_line(text, limit)


def prints_now(hosts: List[str], reached: List[str], batch: List[str], rows: List[HostRow]) -> bool:
    """Whether the report task running for ``batch`` prints the table: once per play, after the batch that holds the
    last host still in the play (a host lost earlier, unreachable or failed, is no longer in the batch or the play and
    must not stop the print), or after a batch in which a host failed (the play may stop there)."""
    live = [host for host in hosts if host in reached] or hosts
    return not hosts or live[-1] in batch or any(not row.ok for row in rows if row.host in batch)


def first_sentence(text: Any, limit: int = REASON_CHARS) -> str:
    """What a message says before its advice: up to the first '. ' of its first line ('0.5.9' is not an end)."""
    line = one_line(text, limit=100000)
    end = line.find('. ')
    return one_line(line[:end] if end > 0 else line.rstrip('.'), limit)


def columns_for(parts: Tuple[Part, ...], rows: Optional[List[HostRow]] = None) -> List[Column]:
    """The base columns with every part's columns inserted after the column they name, else before REASON (which
    stays last: it is the widest); an optional part's columns only when one of ``rows`` has a value for them."""
    added = [col for part in parts for col in part.columns
             if not part.optional or any(row.extra.get(col.key) not in (None, '') for row in rows or [])]
    columns = list(BASE_COLUMNS[:-1]) + [col for col in added if col.after is None] + [BASE_COLUMNS[-1]]
    for col in (c for c in added if c.after is not None):
        keys = [c.key for c in columns]
        columns.insert(keys.index(col.after) + 1 if col.after in keys else len(columns) - 1, col)
    return columns


def render(rows: List[HostRow], columns: List[Column]) -> List[str]:
    """The table as lines: a header, one line per row, columns as wide as their widest cell."""
    cells = [[col.header for col in columns]] + [[col.fmt(row.cell(col.key)) for col in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    out = []
    for line in cells:
        words = [(c.rjust(w) if col.right else c.ljust(w)) for c, w, col in zip(line, widths, columns)]
        out.append('  '.join(words).rstrip())
    return out
