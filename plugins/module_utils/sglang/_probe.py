# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Probes used by llmops.sglang.wait_for_sglang: systemd unit, process id, journal and HTTP endpoints.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
Every decision is a small pure function over recorded text (``systemctl show`` output, journal output,
HTTP status codes) so that it can be tested without systemd or a GPU.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import ssl
import time

from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import HTTPSHandler, ProxyHandler, Request, build_opener

from ansible_collections.llmops.sglang.plugins.module_utils.host import _systemd

UNIT_PROPERTIES = ("ActiveState", "SubState", "Result", "NRestarts", "ExecMainStatus", "ExecMainCode",
                   "ExecMainPID", "InvocationID", "MainPID", "LoadState")


# ---------------------------------------------------------------------------------------------------------------
# systemd unit
# ---------------------------------------------------------------------------------------------------------------


def unit_baseline(props):
    """What to remember from the first observation of the unit."""
    return {
        "NRestarts": props.get("NRestarts"),
        "InvocationID": props.get("InvocationID") or None,
        "ExecMainPID": props.get("ExecMainPID"),
        "was_running": props.get("ActiveState") in ("active", "activating", "reloading"),
    }


def unit_exit_code(props):
    """Exit status of the unit's last main process: negative signal number when killed, None when unknown."""
    status, code = props.get("ExecMainStatus"), props.get("ExecMainCode")
    if status is None or code in (None, 0):
        return None
    if code in (2, 3):  # CLD_KILLED, CLD_DUMPED: ExecMainStatus is the signal number
        return -status
    return status


def unit_verdict(props, baseline):
    """Decide from one ``systemctl show`` observation whether the unit crashed during the wait.

    ``baseline`` is the dict returned by unit_baseline() for the first observation (None on the first call).
    Returns (crashed, reason, exit_code): crashed is a bool; reason a short human text naming what changed;
    exit_code the main process's exit status when systemd recorded one, else None.
    """
    active = props.get("ActiveState") or ""
    sub = props.get("SubState") or ""
    result = props.get("Result") or ""
    exit_code = unit_exit_code(props)
    if props.get("LoadState") == "not-found":
        return True, "unit is not loaded (LoadState=not-found): no such unit", None
    state = "ActiveState=%s SubState=%s Result=%s" % (active or "?", sub or "?", result or "?")
    if active == "failed":
        return True, "unit failed (%s, ExecMainStatus=%s)" % (state, props.get("ExecMainStatus")), exit_code
    if sub == "auto-restart":
        return True, "main process exited and systemd is about to restart the unit (%s, NRestarts=%s)" % (
            state, props.get("NRestarts")), exit_code
    if active in ("inactive", "deactivating"):
        if baseline is not None and baseline.get("was_running"):
            return True, "unit stopped (%s, ExecMainStatus=%s)" % (state, props.get("ExecMainStatus")), exit_code
        return True, "unit is not running (%s): start it before waiting" % state, exit_code
    if baseline is not None:
        n0, n1 = baseline.get("NRestarts"), props.get("NRestarts")
        if n0 is not None and n1 is not None and n1 > n0:
            return True, "unit restarted during the wait (NRestarts %s -> %s, %s)" % (n0, n1, state), None
        i0, i1 = baseline.get("InvocationID"), props.get("InvocationID") or None
        if i0 and i1 and i0 != i1:
            return True, "unit was started again during the wait (InvocationID %s -> %s, %s)" % (i0, i1, state), None
    return False, None, None


def show_unit(unit, run_command, systemctl="systemctl"):
    """The unit's UNIT_PROPERTIES now (through the collection's one systemctl show reader); returns (props, error)."""
    try:
        return _systemd.show(unit, UNIT_PROPERTIES, run_command, systemctl), None
    except _systemd.SystemdError as exc:
        return {}, exc.msg


# ---------------------------------------------------------------------------------------------------------------
# process id
# ---------------------------------------------------------------------------------------------------------------

def pid_identity(pid, proc="/proc"):
    """Return (alive, start_ticks, state) of a process id read from /proc/<pid>/stat.

    start_ticks (field 22) identifies the process across pid reuse; a zombie (state Z) counts as exited.
    """
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (IOError, OSError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False, None, None
        except PermissionError:
            return True, None, None
        return True, None, None
    rest = data[data.rfind(")") + 2:].split()
    state = rest[0] if rest else "?"
    try:
        start = int(rest[19])
    except (IndexError, ValueError):
        start = None
    return state not in ("Z", "X", "x"), start, state


def pid_verdict(pid, baseline_start, proc="/proc"):
    """Returns (exited, reason, start_ticks)."""
    alive, start, state = pid_identity(pid, proc)
    if not alive:
        if state:
            return True, "process %d exited (state %s, not yet reaped by its parent)" % (pid, state), start
        return True, "process %d exited" % pid, start
    if baseline_start is not None and start is not None and start != baseline_start:
        return True, "process %d exited and its pid was reused by another process" % pid, start
    return False, None, start


# ---------------------------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------------------------

_OPENERS = {}


def _opener(https, validate_certs, use_proxy=True):
    """URL opener, built once per process (an SSL context loads the CA store: tens of milliseconds of CPU)."""
    key = (https, validate_certs, use_proxy)
    if key not in _OPENERS:
        handlers = []
        if https:
            ctx = ssl.create_default_context()
            if not validate_certs:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            handlers.append(HTTPSHandler(context=ctx))
        if not use_proxy:
            handlers.append(ProxyHandler({}))
        _OPENERS[key] = build_opener(*handlers)
    return _OPENERS[key]


def is_loopback(url):
    """True when ``url`` names this host (a loopback address, ``localhost`` or the unspecified address a server
    binds to): such requests must not go through a proxy from the environment."""
    host = urlsplit(url if "://" in url else "http://" + url).hostname or ""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def http_get(url, path, api_key=None, validate_certs=True, timeout=3.0, max_body=1024 * 1024):
    """GET url+path; never raises. Returns a dict:
    {url, status (int|None), error (str|None), refused (bool), elapsed_ms (float), body (str|None)}.
    """
    full = url.rstrip("/") + path
    headers = {"Accept": "application/json", "User-Agent": "llmops.sglang.wait_for_sglang"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    t0 = time.monotonic()
    res = {"url": full, "status": None, "error": None, "refused": False, "elapsed_ms": 0.0, "body": None}
    try:
        opener = _opener(full.lower().startswith("https:"), validate_certs, use_proxy=not is_loopback(url))
        resp = opener.open(Request(full, headers=headers), timeout=timeout)
        try:
            res["status"] = resp.getcode()
            res["body"] = resp.read(max_body).decode("utf-8", "replace")
        finally:
            resp.close()
    except HTTPError as exc:
        res["status"] = exc.code
        try:
            res["body"] = exc.read(4096).decode("utf-8", "replace")
        except Exception:  # pylint: disable=broad-except
            res["body"] = None
        finally:
            exc.close()
    except URLError as exc:
        reason = exc.reason
        res["refused"] = isinstance(reason, ConnectionRefusedError)
        res["error"] = "%s" % (reason,)
    except (socket.timeout, TimeoutError) as exc:
        res["error"] = "timed out after %.1fs (%s)" % (timeout, exc)
    except (OSError, ValueError) as exc:
        res["refused"] = isinstance(exc, ConnectionRefusedError)
        res["error"] = "%s: %s" % (type(exc).__name__, exc)
    res["elapsed_ms"] = round((time.monotonic() - t0) * 1000.0, 1)
    return res


def parse_models(body):
    """Return the model ids of a /v1/models JSON body, or None when it is not such a body."""
    try:
        data = json.loads(body or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    ids = []
    for item in data["data"]:
        if isinstance(item, dict) and item.get("id") is not None:
            ids.append(str(item["id"]))
    return ids


def is_auth_failure(status):
    return status in (401, 403)
