# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Secrets kept out of what a module returns: the values the caller names, and SGLang's own secret server arguments.

SGLang logs its whole configuration when it starts (``server_args=ServerArgs(... api_key='...')`` up to 0.5.18,
``server_args={... "api_key": "..."}`` from 0.5.19), so a log tail or a first error line read from its log can hold
the API key even when the caller never named it. :func:`redact` replaces, in every string of a result (nested
dicts and lists too), each value in ``values`` and the value of each of SGLang's secret server arguments
(:data:`SECRET_SERVER_ARGS`) with :data:`MASK`.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import re

MASK = '********'
# ServerArgs fields that hold a credential, in every release the collection supports (0.4.6 - 0.5.23)
SECRET_SERVER_ARGS = ('api_key', 'admin_api_key', 'ssl_keyfile_password')
# field='value' (the dataclass repr), "field": "value" and 'field': 'value' (the dict print), field=value (argv style)
_FIELD_RE = re.compile(r'''(?P<head>(?P<q>['"]?)\b(?:%s)(?P=q)\s*[:=]\s*)(?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s,)}'"]+)'''
                       % '|'.join(SECRET_SERVER_ARGS))


def _mask_field(match):
    value = match.group('value')
    if value in ('None', 'null', "''", '""'):
        return match.group(0)
    quote = value[0] if value[0] in '\'"' else ''
    return match.group('head') + quote + MASK + quote


def redact_text(text, values=()):
    """``text`` with every value in ``values`` and every secret server argument's value masked."""
    for value in sorted((v for v in values if v), key=len, reverse=True):
        text = text.replace(value, MASK)
    if any(name in text for name in SECRET_SERVER_ARGS):
        text = _FIELD_RE.sub(_mask_field, text)
    return text


def redact(obj, values=()):
    """A copy of ``obj`` (a result: str, dict, list, tuple, or anything else as it is) with every string redacted."""
    if isinstance(obj, str):
        return redact_text(obj, values)
    if isinstance(obj, dict):
        return dict((key, redact(value, values)) for key, value in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(item, values) for item in obj)
    return obj
