#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: wait_for_sglang
short_description: Wait until an SGLang server is ready, and tell at once when it crashed or stalled
version_added: 0.1.0
description:
  - Follows the startup of an SGLang server and decides within a fraction of a second whether it is V(ready),
    V(crashed), V(stalled) or timed out (V(timeout)).
  - Reads only the bytes the server log gained since O(log_offset) (never the whole file), feeds them line by line
    to the collection's SGLang log classifier (stages, crash signatures, the false-positive traps of the
    C(server_args=) dump, C(Ignore import error) lines and benign warnings), and watches the systemd O(unit),
    the process O(pid) and the HTTP endpoints under O(url) at the same time.
  - A crash is reported with its class (RV(signature)), the first line that proves it (RV(error_line)), the
    traceback (RV(error_context)) and a hint what to try.
  - 'The action plugin of the same name drives the module in short rounds, so C(ansible-playbook) prints one line per
    stage change and host while the wait runs (for example C(node1: load_weights 57%) and the elapsed seconds), new log lines at C(-v) and the raw
    probe results at C(-vvv).'
options:
  log_path:
    description:
      - The server's log file (for example where the unit's C(StandardOutput=append:) writes).
      - The file may not exist yet when the wait starts; it is read once it appears.
      - A file that is truncated or replaced (new inode, log rotation) is read again from byte 0.
      - When omitted and O(unit) is set, the unit's journal is read instead, for its current invocation only
        (C(_SYSTEMD_INVOCATION_ID)).
    type: path
  log_offset:
    description:
      - Byte offset in O(log_path) where the current run starts; record the file size before restarting the server.
      - Lines before it belong to earlier runs and never count (an old C(fired up) line is never taken for ready).
      - If the file is now shorter than the offset, or was replaced, the new file is read from byte 0.
      - Default is the file's size when the wait starts (0 when it does not exist yet). When that size falls inside a
        line still being written, the rest of that line belongs to the earlier part and is skipped. An explicit
        offset is taken as the start of a line.
    type: int
  unit:
    description:
      - The systemd unit running the server, for example V(sglang.service).
      - Watches C(ActiveState), C(SubState), C(Result), C(NRestarts), C(ExecMainStatus) and C(InvocationID).
        A unit that fails, stops or restarts during the wait (C(NRestarts) grows or C(InvocationID) changes after the
        first observation) is a crash (RV(signature=unit_failed) unless the log names a better class).
    type: str
  pid:
    description:
      - Process id to watch when there is no systemd. Its exit (or a zombie, or reuse of the pid) is a crash
        (RV(signature=process_exited) unless the log names a better class).
    type: int
  url:
    description:
      - Base URL of the server, for example V(http://127.0.0.1:30000).
      - C(/health) answers 503 until warmup has finished on SGLang 0.5.0rc2 and later, so with O(ready_probe=auto)
        ready means C(/health) 200 B(and) the log's ready line (or C(/health) 200 alone when no log is watched).
      - C(/v1/models) only means that HTTP is up; it fills RV(models).
      - HTTP 401 or 403 is reported at once as an authentication problem, never waited out.
    type: str
  served_model_name:
    description:
      - Model id that C(/v1/models) must list (the server's C(--served-model-name)). Requires O(url).
      - Another id means that another server answers on the port; the wait then fails at once.
    type: str
  api_key:
    description:
      - The server's C(--api-key), sent as an C(Authorization) bearer token to every endpoint except C(/health*).
    type: str
  secrets:
    description:
      - Values that must never appear in what the module returns (secret environment values such as C(HF_TOKEN),
        secret server arguments). Each is replaced by C(********) in every line of the log tail, the first error
        line, the message and the progress events, as O(api_key) is.
      - Without it, SGLang's own secret server arguments (C(api_key), C(admin_api_key), C(ssl_keyfile_password)) are
        still masked wherever SGLang logs its configuration (C(server_args=ServerArgs(...)), C(server_args={...})).
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  validate_certs:
    description:
      - Verify the TLS certificate of an C(https) O(url).
    type: bool
    default: true
  ready_probe:
    description:
      - What proves readiness.
      - V(auto) is the log's ready line; with O(url) also C(/health) 200 (C(/health) 200 alone without a log). A server
        whose log level hides the ready line (C(--log-level warning)) is taken as ready when C(/health) answered 200
        for 30 seconds while the log stayed silent; RV(msg) then says so.
      - V(log) is the log's ready line only (HTTP is still probed for RV(models) and authentication).
      - V(health) is C(/health) 200 alone, V(health_generate) is C(/health_generate) 200 alone (SGLang 0.5.0rc0 and
        older, where C(/health) is static).
    type: str
    choices: [auto, log, health, health_generate]
    default: auto
  node_rank:
    description:
      - The C(--node-rank) of this host in a multi-node start. Ranks 1 and higher never print the ready line and open
        no HTTP port.
      - For a rank of 1 or higher, ready means that the log reached stage V(kv_cache) or later, the process or unit
        is alive, and either a scheduler line showed that it is up (C(max_total_num_tokens=) or the end of CUDA graph
        capture) or the log stayed quiet for 10 seconds. O(url) is not probed for these ranks.
      - Readiness of the whole multi-node server is proven only by the wait on node rank 0.
    type: int
    default: 0
  deployment:
    description:
      - Name of the multi-node deployment this host is a rank of (the role passes its inventory group).
      - Handled on the controller by the action plugin. Every host of the same O(deployment) in the same
        C(ansible-playbook) run watches the others, and when one rank ends as V(crashed), V(stalled) or V(timeout),
        the waits on all other ranks end at once as V(crashed), naming the failed rank, its host and its error, in
        RV(peer_failure). Rounds are kept short (2 seconds) so a peer's failure is noticed within about 2 seconds.
      - Without the action plugin (a direct module call) this option has no effect.
    type: str
  deployment_size:
    description:
      - Number of ranks (hosts) in O(deployment). When set, a rank that is ready keeps waiting until every rank of
        the deployment has ended its start, and fails if any of them failed, so no rank reports success for a
        multi-node server that did not come up.
    type: int
  timeout:
    description:
      - Maximum number of seconds to wait for the server to become ready.
    type: int
    default: 1800
  stall_timeout:
    description:
      - Number of seconds without new log output and without any change of stage, unit or HTTP state after which the
        start counts as stalled (for example a hang at NCCL init). V(0) turns this off.
    type: int
    default: 900
  unreachable_timeout:
    description:
      - Seconds the wait rides out a lost connection to the host (the SSH link down, the host rebooting). The action
        plugin retries after 1, 2, 4, ... seconds (at most 30, each with 20 % jitter) and prints one line per retry
        naming the host, the error, the delay and how much of this bound has passed; the wait's state (log offset,
        unit baseline) is kept, so a reconnect continues the same wait.
      - Past this bound the task fails with RV(status=unreachable) naming the host; nothing on the host is touched,
        and a rerun waits for the same start (the role restarts nothing that is starting or ready).
    type: int
    default: 120
    version_added: 0.2.0
  stable_for:
    description:
      - Seconds to keep watching after the server is ready (the stability window). An exit of the process or unit (a
        restart counts, a new C(InvocationID) or C(NRestarts)) or a crash line after the ready line within this window
        fails the start with RV(status=crashed) at RV(stage=ready), and the message says how long after ready it died.
      - Real logs show a scheduler dying 11 seconds after the ready line, after the server already answered; V(0) (the
        default) reports ready at once.
    type: int
    default: 0
    version_added: 0.2.0
  sleep:
    description:
      - Seconds between two probes of the unit, the process, the journal and HTTP. The log file itself is checked with
        a cheap C(stat) every 0.05 seconds, so a new log line is seen within about 0.1 seconds.
    type: float
    default: 0.25
  _state:
    description:
      - Internal. The state of the previous round (log offset, classifier, unit baseline), passed by the action
        plugin between rounds. Do not set it; it is removed from the reported module arguments.
    type: raw
  _round_seconds:
    description:
      - Internal. Longest duration of one round in seconds, set by the action plugin. Do not set it.
    type: float
  _spent:
    description:
      - Internal. Seconds the task ran on the controller before the first round was sent, set by the action plugin
        so that O(timeout) counts from the task's start. Do not set it.
    type: float
    version_added: 0.2.0
  _host:
    description:
      - Internal. Inventory name of the host, set by the action plugin for messages. Do not set it.
    type: str
  crash_patterns:
    description:
      - Extra regular expressions (Python C(re) syntax); a log line that matches one proves a crash
        (RV(signature=traceback) unless the line also matches a more specific built-in class).
    type: list
    elements: str
    default: []
  ignore_patterns:
    description:
      - Regular expressions; matching log lines are never evidence of anything (neither stage nor crash).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - llmops.sglang._attributes.ACTION
attributes:
  check_mode:
    details: One probe round, no waiting; reports RV(status) (V(starting) when nothing is decided yet) and never fails
      because the server is not ready.
  idempotent:
    details: Only reads; never changes the target.
notes:
  - Record the log file's size (M(ansible.builtin.stat)) before restarting the server and pass it as O(log_offset) when
    the log is appended across restarts; otherwise a server that had already printed lines before the wait starts may
    have its first lines counted to the previous run.
  - Multi-rank logs print each stage once per rank; the stage is the furthest any rank reached.
  - Speculative decoding loads a draft model after the target model, so init and weight loading appear again after a
    capture stage. That is not a restart.
  - The systemd watch uses C(systemctl show) (every 2 seconds while the unit's main process is alive, at once when it
    is gone); the journal is followed with C(journalctl --follow -o json _SYSTEMD_INVOCATION_ID=...) only when
    O(log_path) is not given. The user running the module needs read access to the journal.
seealso:
  - module: ansible.builtin.wait_for
    description: Generic waiting for a port, a file or a regular expression; no failure patterns, no stale-line protection.
  - module: ansible.builtin.uri
    description: Single HTTP request; with until/retries it only knows "not yet".
  - module: llmops.sglang.nvidia_driver_match
    description: Check that the NVIDIA kernel module and user space match (cause of many NCCL and CUDA start failures).
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Remember where the new run starts in the appended log
  ansible.builtin.stat:
    path: /var/log/sglang/server.log
  register: sglang_log_before

- name: Restart SGLang
  ansible.builtin.systemd_service:
    name: sglang.service
    state: restarted

- name: Wait for SGLang (log, unit and HTTP)
  llmops.sglang.wait_for_sglang:
    log_path: /var/log/sglang/server.log
    log_offset: "{{ sglang_log_before.stat.size | default(0) }}"
    unit: sglang.service
    url: http://127.0.0.1:30000
    served_model_name: glm-5
    api_key: "{{ sglang_api_key }}"
    timeout: 2400
    stall_timeout: 600
  register: sglang_wait

- name: Show how long each stage took
  ansible.builtin.debug:
    msg: "{{ sglang_wait.stages | map(attribute='stage') | zip(sglang_wait.stages | map(attribute='elapsed')) | list }}"

- name: Wait on a unit that logs to the journal only
  llmops.sglang.wait_for_sglang:
    unit: sglang.service
    url: http://127.0.0.1:30000

- name: Wait on node rank 1 of a two-node start (no ready line, no HTTP there)
  llmops.sglang.wait_for_sglang:
    unit: sglang.service
    node_rank: 1

- name: Keep going on failure and decide later
  llmops.sglang.wait_for_sglang:
    log_path: /srv/sglang/server.log
    pid: "{{ sglang_pid }}"
    crash_patterns:
      - 'RuntimeError: my custom kernel failed'
    ignore_patterns:
      - 'Traceback .* in my_benign_plugin'
  register: sglang_wait
  ignore_errors: true  # the next task reports the signature to the operator

- name: Report the crash class
  ansible.builtin.debug:
    msg: "{{ sglang_wait.signature }}: {{ sglang_wait.error_line }}"
  when: sglang_wait.status == 'crashed'
'''

RETURN = r'''
status:
  description:
    - V(ready), V(crashed), V(stalled) or V(timeout); V(error) when the watcher cannot decide because of a problem on its
      side (HTTP 401/403, O(served_model_name) not served, an unreadable O(log_path), or a O(unit) that C(systemctl)
      cannot show or that does not exist).
    - V(rebooted) when the host's boot id changed since the wait began (a reboot, not a crash of the server; a rerun
      waits for the start the unit made at boot); V(unreachable) when the host could not be reached for
      O(unreachable_timeout) seconds (the server was not touched).
    - V(starting) only in check mode, when one probe round decided nothing yet.
  returned: always
  type: str
  sample: crashed
ready:
  description: Whether RV(status) is V(ready).
  returned: always
  type: bool
  sample: false
elapsed:
  description: Seconds from the start of the wait to the decision.
  returned: always
  type: float
  sample: 83.2
stage:
  description: Last startup stage reached (V(start), V(init_distributed), V(load_weights), V(kv_cache), V(cuda_graph),
    V(http_listening), V(warmup), V(ready)).
  returned: always
  type: str
  sample: cuda_graph
stages:
  description:
    - The stages in the order they were first reached, with the line that showed each one.
    - C(elapsed) is seconds from the start of the wait until the line was read.
    - C(log_elapsed) is seconds from the run's first timestamped SGLang line to this stage's line, from SGLang's own
      C([YYYY-MM-DD HH:MM:SS]) prefixes (one-second resolution), or null when the line has no timestamp. It gives the
      real stage durations even when the wait started late or read many lines at once.
  returned: always
  type: list
  elements: dict
  sample:
    - {stage: init_distributed, elapsed: 2.1, log_elapsed: 2.0, line: "[2026-06-11 05:10:02 TP0] Init torch distributed begin."}
    - {stage: load_weights, elapsed: 3.0, log_elapsed: 3.0, line: "[2026-06-11 05:10:03 TP0] Load weight begin. avail mem=23.2 GB"}
signature:
  description: Crash class when RV(status) is V(crashed), else null. One of V(traceback), V(sigquit_child), V(cuda_oom),
    V(cuda_error), V(nccl_error), V(import_error), V(arg_error), V(driver_mismatch), V(unsupported_arch),
    V(device_error), V(warmup_failed), V(silent_exit), V(unit_failed), V(process_exited), V(post_ready_crash) (a crash
    line after the ready line, within O(stable_for)).
  returned: always
  type: str
  sample: cuda_oom
error_line:
  description: Exact text of the first log line that proves the failure (including progress-bar carriage returns), or null.
  returned: always
  type: str
  sample: "[2026-06-11 05:11:58 TP0] Scheduler hit an exception: Traceback (most recent call last):"
error_lineno:
  description: Line number of RV(error_line), counted from O(log_offset) (or from the start of the journal invocation).
  returned: always
  type: int
  sample: 412
root_cause:
  description: The root cause of the crash as its log line, the one the message names after C(root cause:) and the run's
    table shows; the most specific exception or C(what()) line of the crash's traceback (in a chained traceback the
    exception that names the cause, not the wrapper raised from it), else the last exception line of RV(error_context).
    For a rank that stopped because another rank of its deployment failed, that rank's. Null unless crashed, or when
    the log has no exception line.
  returned: always
  type: str
  sample: "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name'"
error_context:
  description: The traceback or the lines around RV(error_line) (at most about 40 lines); empty unless crashed.
  returned: always
  type: list
  elements: str
  sample: ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
log_tail:
  description: The last lines of this run's log (ANSI colours removed, last progress-bar segment only).
  returned: always
  type: list
  elements: str
  sample: ["[2026-06-11 05:11:58] Received sigquit from a child process. It usually means the child failed."]
log_source:
  description: Where log lines came from, V(file), V(journal), or null when no log is watched.
  returned: always
  type: str
  sample: file
log_reset:
  description: V(appeared), V(truncated) or V(replaced) when the log file appeared, was truncated or replaced during
    the wait, else null.
  returned: always
  type: str
  sample: replaced
log_offset_end:
  description: Byte offset in O(log_path) up to which the log was read; pass it as O(log_offset) to a later wait.
  returned: when O(log_path) is set
  type: int
  sample: 45972
unit:
  description: Last C(systemctl show) properties of O(unit) (or C(error) when C(systemctl) failed).
  returned: when O(unit) is set
  type: dict
  sample: {ActiveState: failed, SubState: failed, Result: exit-code, NRestarts: 0, ExecMainStatus: 1,
           InvocationID: 2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e, MainPID: 0, ExecMainPID: 41210}
http:
  description: Last HTTP probe results per endpoint (C(health), C(v1_models)), each with C(url), C(status),
    C(error), C(refused) and C(elapsed_ms).
  returned: when O(url) is set and HTTP was probed
  type: dict
  sample: {url: "http://127.0.0.1:30000", health: {url: "http://127.0.0.1:30000/health", status: 200, error: null,
           refused: false, elapsed_ms: 3.1}}
models:
  description: Model ids listed by C(/v1/models), or null when not (yet) answered.
  returned: always
  type: list
  elements: str
  sample: ["glm-5"]
progress:
  description: Last progress-bar percentage seen in the current stage (weight loading, CUDA graph capture), or null.
  returned: always
  type: int
  sample: 57
peer_failure:
  description:
    - With O(deployment), the failure of another rank that ended this wait (C(host), C(node_rank), C(status),
      C(stage), C(signature), C(error_line), C(msg)).
  returned: when another rank of the deployment failed first
  type: dict
  sample: {host: node2, node_rank: 1, status: crashed, stage: init_distributed, signature: nccl_error,
           error_line: "[2025-02-26 12:01:56 TP2] Scheduler hit an exception: Traceback (most recent call last):",
           msg: "SGLang on node2 crashed after 3.2s at stage init_distributed: ..."}
exited:
  description: How the process or unit was seen to exit (C(by) V(unit) or V(pid), C(reason), C(exit_code)), or null.
  returned: always
  type: dict
  sample: {by: unit, reason: "unit sglang.service: unit failed (ActiveState=failed SubState=failed Result=exit-code)",
           exit_code: 1}
boot_id:
  description: The host's boot id when the wait began (C(/proc/sys/kernel/random/boot_id)); with RV(status=rebooted)
    the message names the new one.
  returned: always
  type: str
  sample: 6c1b5b3e-3f2a-4d8e-9d51-0b4c1e2f3a4b
  version_added: 0.2.0
connection_lost:
  description: Seconds each lost connection lasted that the wait rode out (see O(unreachable_timeout)); empty when none.
  returned: always
  type: list
  elements: float
  sample: [31.4]
  version_added: 0.2.0
ready_elapsed:
  description: Seconds into the wait when the server was first ready (the stability window of O(stable_for) began),
    or null when it never was or O(stable_for) is V(0).
  returned: always
  type: float
  sample: 412.3
  version_added: 0.2.0
msg:
  description: What was decided, why, and what to try.
  returned: always
  type: str
  sample: >-
    SGLang on node1 crashed after 83.2s at stage cuda_graph: cuda_oom: "torch.OutOfMemoryError: CUDA out of memory. ..."
    (log /var/log/sglang/server.log, line 412); try a lower --mem-fraction-static or --cuda-graph-max-bs
'''

import re
import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.wait._sources import JournalStream, journal_follow_argv
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._redact import redact
from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import process_age
from ansible_collections.llmops.sglang.plugins.module_utils.wait._round import TERMINAL, WaitParams, WaitRound
from ansible_collections.llmops.sglang.plugins.module_utils.wait._spec import argument_spec


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_one_of=[('log_path', 'unit', 'url')],
        required_by={'served_model_name': 'url'},
        supports_check_mode=True,
    )
    p = module.params
    public = dict((k, v) for k, v in p.items() if not k.startswith('_'))
    invocation = {'module_args': dict((k, ('VALUE_SPECIFIED_IN_NO_LOG_PARAMETER' if k in ('api_key', 'secrets') and v else v))
                                      for k, v in public.items())}
    hidden = [p['api_key'] or ''] + list(p['secrets'])

    for opt in ('crash_patterns', 'ignore_patterns'):
        for pat in p[opt]:
            try:
                re.compile(pat)
            except re.error as exc:
                module.fail_json(msg="%s entry %r is not a valid Python regular expression: %s; fix or quote the pattern"
                                 % (opt, pat, exc), invocation=invocation)
    for opt in ('timeout', 'stall_timeout', 'stable_for', 'unreachable_timeout', 'log_offset', 'node_rank', 'pid'):
        if p[opt] is not None and p[opt] < 0:
            module.fail_json(msg="%s must be 0 or more, got %s" % (opt, p[opt]), invocation=invocation)
    if p['sleep'] <= 0:
        module.fail_json(msg="sleep must be more than 0 seconds, got %s" % p['sleep'], invocation=invocation)
    if p['url'] and not re.match(r'^https?://', p['url']):
        module.fail_json(msg="url %r must start with http:// or https://, for example http://127.0.0.1:30000" % p['url'],
                         invocation=invocation)

    bins = {}
    if p['unit']:
        for name in ('systemctl',) + (() if p['log_path'] else ('journalctl',)):
            path = module.get_bin_path(name)
            if not path:
                module.fail_json(msg="unit=%s is set but %s was not found on %s: the host does not run systemd; watch the "
                                     "server with pid and log_path instead" % (p['unit'], name, socket.gethostname()),
                                 invocation=invocation)
            bins[name] = path

    runner = module_runner(module)

    def run_command(argv, data=None):
        argv = list(argv)
        argv[0] = bins.get(argv[0], argv[0])
        return runner(argv, data)

    params = WaitParams.from_options(public, host=p['_host'])
    state = p['_state']
    driven = state is not None  # called by the action plugin: one round, the plugin decides failure
    if module.check_mode:
        round_seconds = 0.0
    elif driven:
        round_seconds = p['_round_seconds'] if p['_round_seconds'] is not None else 10.0
    else:
        round_seconds = None

    def follow_journal(invocation_id, cursor):
        return JournalStream.spawn(journal_follow_argv(invocation_id, cursor, bins['journalctl']))

    stream_factory = follow_journal if p['unit'] and not p['log_path'] else None
    # A first round counts what passed before it could look: the controller's share and this process's start-up
    # (AnsiballZ, imports), so that a task's timeout is the user's timeout whatever the transport costs.
    spent = (p['_spent'] or 0.0) + process_age()
    wait_round = WaitRound(params, state=(state or None) if isinstance(state, dict) else None, run_command=run_command,
                           journal_stream_factory=stream_factory, spent=spent)
    # nothing read from the server's log leaves the host with a secret in it (SGLang logs its api_key at start)
    res = redact(wait_round.run(round_seconds), hidden)
    if driven:  # the round's state and progress events go back to the action plugin
        module.exit_json(changed=False, invocation=invocation, **res)
    res.pop('_state')
    res.pop('_events')
    if module.check_mode or res['status'] == 'ready':
        module.exit_json(changed=False, invocation=invocation, **res)
    if res['status'] not in TERMINAL:  # pragma: no cover - a round without a limit only ends on a terminal status
        res['status'] = 'timeout'
    module.fail_json(invocation=invocation, **res)


if __name__ == '__main__':
    main()
