# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of llmops.sglang.nvidia_driver_deploy: one step of the nvidia_driver role on one host, returning the
role's one result (registered as nvidia_driver_result). The decisions are plugin_utils/_nvidia_plan.py's."""

from __future__ import annotations

from typing import Any, Dict

from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._host import dry_run_dnf_argv
from ansible_collections.llmops.sglang.plugins.plugin_utils._action_host import ActionHost
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import plain
from ansible_collections.llmops.sglang.plugins.plugin_utils._nvidia_plan import (
    HostFacts, NvidiaInputs, no_reboot, plan, reboot_of, stream_actions, verify_problem)

RESULT = 'nvidia_driver_result'
STEPS = ('plan', 'streams', 'install', 'verify')
ARGUMENT_SPEC = dict(step=dict(type='str', required=True, choices=list(STEPS)))
# what the role's result carries of llmops.sglang.nvidia_driver_match's
MATCH_KEYS = ('match', 'kernel_module', 'userspace', 'mismatches', 'findings', 'reason', 'recommended_action', 'fix_packages',
              'in_container', 'container_kind', 'distro_family')


class Failed(Exception):
    def __init__(self, msg: str, result: Any = None):
        super().__init__(msg)
        self.msg, self.result = msg, result


class ActionModule(ActionBase):
    """Runs one step of the nvidia_driver role on this host."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        step = args['step']
        inputs = NvidiaInputs.from_vars(dict((n, plain(self._templar.template(task_vars[n]))) for n in NvidiaInputs.names()
                                             if n in task_vars))
        earlier = task_vars.get(RESULT) if step != 'plan' else None
        state: Dict[str, Any] = dict(plain(earlier)) if isinstance(earlier, dict) else {}
        for key in ('changed', 'failed', 'warnings', 'diff'):
            state.pop(key, None)
        host = ActionHost(self, task_vars, task_vars.get('inventory_hostname') or '')
        changed = False
        try:
            if not state.get('failure'):
                changed = getattr(self, '_step_' + step)(host, inputs, state, task_vars)
        except Failed as failed:
            state['failure'] = {'step': step, 'msg': failed.msg, 'result': failed.result}
            state['msg'] = failed.msg
        state['changed_in_run'] = bool(state.get('changed_in_run')) or changed
        result.update(state)
        # the role's last step (verify) reports the whole run's change, so the registered result says whether the role
        # changed the host; the others their own (the PLAY RECAP counts them)
        result['changed'] = state['changed_in_run'] if step == 'verify' else changed
        return result

    @staticmethod
    def _match(host: ActionHost, args: Dict[str, Any], read_only: bool = False) -> Dict[str, Any]:
        res = host.module('llmops.sglang.nvidia_driver_match', args, read_only=read_only)
        return dict((k, res.get(k)) for k in MATCH_KEYS + ('msg', 'failed', 'changed', 'fix_error', 'restored') if k in res)

    def _step_plan(self, host: ActionHost, inputs: NvidiaInputs, state: Dict[str, Any], _task_vars) -> bool:
        """Report only (nvidia_driver_manage false): compare and say, never fail. Else read the host once and plan."""
        state.update(status='report', msg='', failure=None, plan=None, reboot=no_reboot())
        if not inputs.manage:
            found = self._report(host)
            state.update(found, status='match' if found.get('match') else 'report')
            host.say('NVIDIA driver (report only): %s' % (found.get('reason') or found.get('msg') or 'no result'))
            state['msg'] = found.get('reason') or found.get('msg') or ''
            return False
        wanted = ['ansible_distribution*', 'ansible_os_family', 'ansible_kernel', 'ansible_architecture']
        setup = host.module('ansible.legacy.setup', {'gather_subset': ['!all', 'min'], 'filter': wanted}, read_only=True)
        facts = HostFacts.from_setup(dict((k[len('ansible_'):], v) for k, v in (setup.get('ansible_facts') or {}).items()))
        # in check mode too: it only reads, and a --check run's dnf queries keep their cache and logs off the host
        info = host.module('llmops.sglang.nvidia_driver_info', {})
        if info.get('failed'):
            raise Failed(info.get('msg') or 'llmops.sglang.nvidia_driver_info failed', info)
        decided = plan(inputs, facts, info)
        state.update(plan=decided.to_json(), host=facts.__dict__, versionlocks=info.get('versionlocks'),
                     loaded=(info.get('kernel_module') or {}).get('version'))
        if decided.refusals:
            raise Failed(' '.join(decided.refusals))
        if host.check_mode and decided.package_manager == 'apt':
            self._check_mode_needs_python_apt(host)
        host.say('NVIDIA driver %s, %s kernel modules, from %s%s; GPUs: %s; loaded module: %s'
                 % (decided.version or 'branch ' + decided.branch, decided.flavor, decided.source,
                    ' (user space only)' if inputs.userspace_only else '', ', '.join(decided.archs) or 'not detected',
                    state['loaded'] or 'none'))
        if host.check_mode and decided.package_manager == 'apt' and decided.headers:
            return self._check_mode_headers(host, decided.headers, decided.headers_hint)
        return False

    @staticmethod
    def _check_mode_headers(host: ActionHost, headers, hint: str) -> bool:
        """--check on the Debian family: the kernel headers install's dry run, here instead of the headers task (left out
        in check mode): ansible.builtin.apt's check mode runs apt-get --simulate, which writes apt's planner log
        (/var/log/apt/eipp.log.xz); with Dir::Log::Planner empty it writes nothing. Fails as the task would."""
        argv = ['apt-get', '-s', 'install', '-o', 'Dir::Log::Planner=', '--no-install-recommends'] + list(headers)
        done = host.module('ansible.legacy.command', {'argv': argv}, read_only=True)
        if done.get('failed') or done.get('rc'):
            why = ((done.get('stderr') or done.get('stdout') or done.get('msg') or 'apt-get failed').strip().splitlines() or [''])[-1]
            raise Failed('%s (%s)' % (hint, why), done)
        would = [line.split()[1] for line in (done.get('stdout') or '').splitlines() if line.startswith('Inst ')]
        host.say('Kernel headers for the DKMS build: %s' % ('would install ' + ', '.join(would) if would else 'installed already'))
        return bool(would)

    @staticmethod
    def _check_mode_needs_python_apt(host: ActionHost) -> None:
        """ansible.builtin.apt (the Debian family's repository, headers and package-list tasks) fails in check mode
        without python3-apt, after the role's first steps; say so before any of them, reading dpkg's database only."""
        found = host.module('ansible.legacy.command', {'argv': ['dpkg-query', '-W', '-f=${db:Status-Abbrev}', 'python3-apt']},
                            read_only=True)
        if (found.get('stdout') or '').startswith('ii'):
            return
        raise Failed('--check of the nvidia_driver role on this Debian-family host needs python3-apt, which is not '
                     'installed: ansible.builtin.apt cannot say what it would change without it (a run without --check '
                     'installs it itself). Install python3-apt on the host (apt-get install python3-apt) and run --check '
                     'again, or set nvidia_driver_manage: false to only compare the driver. Nothing was changed.', found)

    def _report(self, host: ActionHost) -> Dict[str, Any]:
        """The report-only comparison always runs in check mode: it never fixes anything."""
        task = self._task
        saved = task.check_mode
        task.check_mode = True
        try:
            return self._match(host, {})
        finally:
            task.check_mode = saved

    def _step_streams(self, host: ActionHost, _inputs, state: Dict[str, Any], _task_vars) -> bool:
        """Red Hat family below R590: enable the branch's nvidia-driver module stream (without a profile), resetting
        another enabled one first; a repository without the module is used as it is."""
        wanted = tuple((state.get('plan') or {}).get('streams_wanted') or ())
        if not wanted:
            return False
        argv = ['dnf', '-q', 'module', 'list', 'nvidia-driver']
        if host.check_mode:  # dnf's cache and logs in the task's temporary directory, as the modules' dnf queries do
            argv = dry_run_dnf_argv(argv, host.scratch('dnf'))
        listed = host.module('ansible.legacy.command', {'argv': argv}, read_only=True)
        text = (listed.get('stdout') or '') + (listed.get('stderr') or '')
        if listed.get('rc') and 'No matching Modules' not in text:
            raise Failed('dnf module list nvidia-driver failed: %s' % (listed.get('stderr') or listed.get('msg')), listed)
        want, reset, enable = stream_actions(listed.get('stdout') or '', wanted)
        changed = False
        commands = [['dnf', '-q', '-y', 'module', 'reset', 'nvidia-driver']] if reset else []
        commands += [['dnf', '-q', '-y', 'module', 'enable', 'nvidia-driver:' + want]] if enable else []
        state['stream'] = want
        if host.check_mode and commands:
            # dnf resolves the install against the enabled stream: its dry run cannot run before the stream is enabled
            state['stream_pending'] = want
            host.say('--check: would enable the module stream nvidia-driver:%s' % want)
            return True
        for argv in commands:
            done = host.module('ansible.legacy.command', {'argv': argv})
            if done.get('failed'):
                raise Failed('%s failed: %s' % (' '.join(argv), done.get('stderr') or done.get('msg')), done)
            changed = changed or not done.get('skipped')
        return changed

    def _step_install(self, host: ActionHost, inputs: NvidiaInputs, state: Dict[str, Any], task_vars) -> bool:
        """One transaction through llmops.sglang.nvidia_driver_match (dry run first, previous packages back on failure,
        the hold), then whether the kernel side changed and a reboot is due."""
        decided = state['plan']
        if host.check_mode and state.get('stream_pending'):
            state['installed'] = {'fix_packages': list(decided['names']), 'changed': True}
            host.say("--check: the install's dry run needs the module stream nvidia-driver:%s enabled; a run without --check "
                     'enables it, then installs %s%s' % (state['stream_pending'], ', '.join(decided['names']),
                                                         ' at ' + decided['version'] if decided['version'] else ''))
            return True
        found = self._match(host, {'install_packages': decided['names'], 'install_version': decided['version'],
                                   'kernel_side': decided['kernel_side'], 'hold': inputs.hold,
                                   'package_manager': decided['package_manager']})
        if found.get('failed'):
            raise Failed(found.get('msg') or 'the install failed', found)
        local = (task_vars.get('ansible_connection') or 'ssh') == 'local'
        state['reboot'] = reboot_of(inputs, found, local)
        state['installed'] = found
        if state['reboot']['msg']:
            host.say(state['reboot']['msg'])
        return bool(found.get('changed'))

    def _step_verify(self, host: ActionHost, inputs: NvidiaInputs, state: Dict[str, Any], task_vars) -> bool:
        """The loaded module and user space match (llmops.sglang.nvidia_driver_match, read-only); a reboot the role did
        not make is pending."""
        would = (state.get('installed') or {}).get('fix_packages') if host.check_mode else None
        if would:
            state.update(status='would install', msg='--check: would install %s; a run without --check installs them and proves the '
                         'match' % ', '.join(would))
            host.say(state['msg'])
            return False
        found = self._match(host, {'expected_version': state['plan']['expected_version']})
        pending = state.get('reboot') if not (state.get('reboot') or {}).get('reboot') else None
        local = (task_vars.get('ansible_connection') or 'ssh') == 'local'
        problem = verify_problem(inputs, found, pending, local)
        state.update(dict((k, found.get(k)) for k in MATCH_KEYS if k in found))
        state['status'] = 'match' if not problem else 'reboot pending' if (pending or {}).get('kernel_changed') else 'drift'
        if problem and inputs.verify:
            raise Failed(problem, found)
        state['msg'] = problem or 'NVIDIA kernel module %s and user space match' % ((found.get('kernel_module') or {}).get('version') or '?')
        host.say(state['msg'])
        return False
