# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The TCP ports an SGLang server will bind, and who listens on them now.

Listeners come from /proc/net/tcp and /proc/net/tcp6 (state 0A, LISTEN); a listener's process is the one holding the
socket inode (``socket:[inode]`` among its file descriptors). Standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import ipaddress
import os

LISTEN = '0A'
DEFAULT_PORT = 30000
# SGLang's default for --disaggregation-bootstrap-port (server_args.py).
DEFAULT_BOOTSTRAP_PORT = 8998


def _flags(server_args):
    """Server arguments keyed by flag name without dashes prefix and with '-' (the sglang_cli_args rule)."""
    return dict((str(key).lstrip('-').replace('_', '-'), value) for key, value in (server_args or {}).items())


def _port(value):
    try:
        port = int(value)
    except (TypeError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def server_ports(server_args):
    """[{'port', 'flag'}] the server binds: --port, --nccl-port, the --dist-init-addr port on rank 0, and the
    disaggregation bootstrap port of a prefill server."""
    flags = _flags(server_args)
    wanted = [('--port', _port(flags.get('port', DEFAULT_PORT)))]
    if flags.get('nccl-port') not in (None, ''):
        wanted.append(('--nccl-port', _port(flags['nccl-port'])))
    addr = flags.get('dist-init-addr')
    if addr and int(flags.get('node-rank', 0) or 0) == 0:
        wanted.append(('--dist-init-addr', _port(str(addr).rsplit(':', 1)[-1])))
    if str(flags.get('disaggregation-mode', 'null')) == 'prefill':
        wanted.append(('--disaggregation-bootstrap-port', _port(flags.get('disaggregation-bootstrap-port', DEFAULT_BOOTSTRAP_PORT))))
    ports = []
    for flag, port in wanted:
        if port is not None and port not in [entry['port'] for entry in ports]:
            ports.append({'port': port, 'flag': flag})
    return ports


def _address(hex_addr):
    """Address text of /proc/net/tcp's hex form (little-endian per 32-bit word)."""
    raw = bytes.fromhex(hex_addr)
    words = [raw[i:i + 4][::-1] for i in range(0, len(raw), 4)]
    return str(ipaddress.ip_address(b''.join(words)))


def parse_net_tcp(text):
    """LISTEN sockets of /proc/net/tcp{,6}: [{'address', 'port', 'inode'}]."""
    listeners = []
    for line in (text or '').splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != LISTEN:
            continue
        addr, port = parts[1].rsplit(':', 1)
        listeners.append({'address': _address(addr), 'port': int(port, 16), 'inode': int(parts[9])})
    return listeners


def read_listeners(proc_root='/proc'):
    listeners = []
    for name in ('tcp', 'tcp6'):
        try:
            with open(os.path.join(proc_root, 'net', name)) as handle:
                listeners += parse_net_tcp(handle.read())
        except OSError:
            continue
    return listeners


def listener_pids(listeners, procs):
    """{inode: [pid]} of the processes holding each listening socket."""
    wanted = dict(('socket:[%d]' % entry['inode'], entry['inode']) for entry in listeners)
    owners = {}
    for pid, proc in procs.items():
        for target in proc.fds.values():
            inode = wanted.get(target)
            if inode is not None and pid not in owners.setdefault(inode, []):
                owners[inode].append(pid)
    return owners
