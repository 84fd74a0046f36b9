# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU health on recorded outputs (tests/fixtures/nvidia_health, each case with its public source): Xid lines read
against NVIDIA's catalog, ``nvidia-smi -q`` memory health, nvidia-smi's failure once a GPU is gone, the ``dcgmi diag``
table, and the pre-flight's decision for the server's GPUs (which GPUs are its own, what blocks a start, warn mode)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _dcgm as dcgm
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _smi_q as smi_q
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _xid as xid
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _gpu_health as gh
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _checks as pf

CORPUS = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'nvidia_health')
CASES = sorted(name for name in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, name)))


def text(case, name):
    path = os.path.join(CORPUS, case, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def expected(case):
    with open(os.path.join(CORPUS, case, 'expected.json'), encoding='utf-8') as handle:
        return json.load(handle)


@pytest.mark.parametrize('case', CASES)
def test_every_case_cites_its_public_source(case):
    assert expected(case)['source'].startswith('https://github.com/')
    with open(os.path.join(CORPUS, 'README.md'), encoding='utf-8') as handle:
        assert '`%s`' % case in handle.read()


@pytest.mark.parametrize('case', [c for c in CASES if text(c, 'kernel_log.txt') is not None])
def test_recorded_kernel_logs(case):
    log = text(case, 'kernel_log.txt')
    events = xid.parse(log)
    assert [{'code': e.code, 'pci': e.pci, 'severity': e.severity} for e in events] == expected(case)['xids']
    assert xid.gpu_uuids(log) == expected(case)['uuids']


@pytest.mark.parametrize('case', [c for c in CASES if text(c, 'nvidia-smi-q.txt') is not None])
def test_recorded_nvidia_smi_q(case):
    report = smi_q.parse(text(case, 'nvidia-smi-q.txt'))
    got = [{'pci': g.pci, 'minor': g.minor, 'faults': [fault[0] for fault in g.faults()]} for g in report.gpus]
    assert got == expected(case)['gpus']
    assert report.failed_pci == expected(case)['failed_pci']


@pytest.mark.parametrize('case', [c for c in CASES if text(c, 'dcgmi-diag.txt') is not None])
def test_recorded_dcgmi_diag(case):
    report = dcgm.parse(text(case, 'dcgmi-diag.txt'))
    assert len(report.tests) == expected(case)['tests']
    assert dict((t.name, t.failed_gpus) for t in report.failed) == expected(case)['failed']


def test_xid_severity_follows_nvidias_immediate_action():
    assert xid.classify(79)[:2] == (xid.FAULT, 'RESTART_BM')        # fallen off the bus
    assert xid.classify(48)[:2] == (xid.FAULT, 'WORKFLOW_XID_48')   # double bit ECC
    assert xid.classify(95)[0] == xid.FAULT and xid.classify(94)[0] == xid.APP  # uncontained vs contained
    assert xid.classify(119)[0] == xid.classify(120)[0] == xid.FAULT  # GSP
    assert xid.classify(45)[0] == xid.INFO and xid.classify(63)[0] == xid.INFO  # after a kill; a remap event
    assert xid.classify(31)[0] == xid.APP
    assert xid.classify(999)[:2] == (xid.FAULT, 'UNKNOWN')
    # NVLink 5 and Xid 154: the line decides
    assert xid.classify(145, 'RLW_REMAP Fatal XC0 i0 Link 00 (0x00000004 0x00000040)')[0] == xid.FAULT
    assert xid.classify(145, 'RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000004 0x00000001)')[0] == xid.INFO
    assert xid.classify(154, 'GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)')[0] == xid.FAULT
    assert xid.classify(154, 'GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)')[0] == xid.INFO


def test_pci_addresses_of_every_tool_meet():
    assert xid.pci_key('00000000:9B:00.0') == xid.pci_key('PCI:0000:9b:00') == xid.pci_key('0000:9b:00.0') == '0000:9b:00'
    assert xid.pci_key('garbage') == ''


def test_xid_lines_inside_syslog_escapes_and_continuations():
    events = xid.parse('Jun 30 11:07:05 gpu-0 kernel: NVRM: Xid (PCI:0000:9b:00): 48, pid=7, name=python3, DBE (0x1)#012next')
    assert [(e.code, e.pci, e.pid, e.process, e.message) for e in events] == [(48, '0000:9b:00', '7', 'python3', 'DBE (0x1)')]


# ------------------------------------------------------------------------------------------------ the decision

H100 = text('h100x8-ecc-healthy', 'nvidia-smi-q.txt')
XID119 = text('xid119-gsp-timeout-h100-dmesg', 'kernel_log.txt')  # GPU 4 of an 8x H100 node, PCI 0000:9b:00


def test_healthy_gpus_pass():
    check = gh.decide(gh.HealthInputs(smi=H100, kernel_log=''), gh.Wanted(indices=[0, 1], by='CUDA_VISIBLE_DEVICES=0,1'))
    assert check.status == pf.OK and check.problems == []
    assert [row['pci'] for row in check.details['gpus']] == ['0000:19:00', '0000:3b:00']


def test_an_xid_on_one_of_the_servers_gpus_blocks_with_its_meaning():
    check = gh.decide(gh.HealthInputs(smi=H100, kernel_log=XID119), gh.Wanted(indices=[4, 5], by='CUDA_VISIBLE_DEVICES=4,5'))
    assert check.status == pf.FAILED
    assert len(check.problems) == 1
    problem = check.problems[0]
    assert problem.startswith('GPU 4 (0000:9b:00, GPU-2b6f61f9-8b00-3b57-d912-b62792120662) has Xid 119 (GSP RPC Timeout; NVIDIA: RESET_GPU) x5')
    assert [row['xids'] for row in check.details['gpus']] == [[119], []]


def test_an_xid_on_another_servers_gpu_does_not_block():
    check = gh.decide(gh.HealthInputs(smi=H100, kernel_log=XID119), gh.Wanted(indices=[0, 1]))
    assert check.status == pf.OK


def test_warn_mode_reports_and_lets_the_start_go_on():
    check = gh.decide(gh.HealthInputs(smi=H100, kernel_log=XID119), gh.Wanted(indices=[4]), mode='warn')
    assert check.status == pf.WARNING and len(check.problems) == 1
    assert pf.summary_line([check]).startswith('gpu_health warning (1 GPU(s) of the server, 1 faulty)')


def test_a_configured_gpu_that_nvidia_smi_no_longer_lists():
    check = gh.decide(gh.HealthInputs(smi=H100), gh.Wanted(indices=[7, 8], by='CUDA_VISIBLE_DEVICES=7,8'))
    assert check.status == pf.FAILED
    assert check.problems[0].startswith("GPU 8 is the server's (CUDA_VISIBLE_DEVICES=7,8) but nvidia-smi lists only 8 GPU(s)")
    assert [row['present'] for row in check.details['gpus']] == [True, False]


def test_nvidia_smi_that_cannot_reach_a_gpu_blocks():
    check = gh.decide(gh.HealthInputs(smi=text('smi-device-handle-unknown-error', 'nvidia-smi-q.txt')), gh.Wanted(indices=[0]))
    assert check.status == pf.FAILED
    assert 'Unable to determine the device handle for GPU 0000:0B:00.0' in check.problems[0]


def test_memory_faults_block_and_name_the_fix():
    pending = text('xid63-a100-remap-pending', 'nvidia-smi-q.txt')
    check = gh.decide(gh.HealthInputs(smi=pending, kernel_log=text('xid63-a100-remap-pending', 'kernel_log.txt')), gh.Wanted(indices=[0]))
    assert check.status == pf.FAILED
    assert check.details['gpus'][0]['memory'] == ['row_remap_pending'] and check.details['gpus'][0]['xids'] == []  # Xid 63 is info
    assert 'nvidia-smi -r -i' in check.problems[0]


def test_minor_numbers_map_device_nodes_to_gpus():
    rtx = text('rtx4090x8-minor-numbers', 'nvidia-smi-q.txt')  # minor 3 is index 0, minor 0 is index 3
    wanted = gh.wanted_gpus({}, ['/dev/nvidia0', '/dev/nvidia3'], {})
    check = gh.decide(gh.HealthInputs(smi=rtx), wanted)
    assert [(row['gpu'], row['pci']) for row in check.details['gpus']] == [('GPU 3', '0000:61:00'), ('GPU 0', '0000:01:00')]


def test_dcgmi_failure_on_a_server_gpu_blocks_and_elsewhere_does_not():
    diag = text('dcgmi-diag-gpu-memory-fail', 'dcgmi-diag.txt')  # failed on GPU 0
    mine = gh.decide(gh.HealthInputs(smi=H100, dcgm=diag), gh.Wanted(indices=[0]))
    other = gh.decide(gh.HealthInputs(smi=H100, dcgm=diag), gh.Wanted(indices=[1]))
    assert mine.status == pf.FAILED and mine.problems[0].startswith('dcgmi diag -r 1: GPU Memory failed on GPU 0')
    assert other.status == pf.OK
    assert gh.decide(gh.HealthInputs(smi=H100, dcgm=text('dcgmi-diag-deployment-pass', 'dcgmi-diag.txt')), gh.Wanted(indices=[0])).status == pf.OK


def test_a_dcgm_without_host_engine_is_a_warning():
    check = gh.decide(gh.HealthInputs(smi=H100, dcgm='Error: unable to establish a connection to the specified host: localhost\n'),
                      gh.Wanted(indices=[0]))
    assert check.status == pf.OK
    assert check.details['warnings'][0].startswith('dcgmi diag -r 1 did not run')


def test_without_nvidia_smi_every_fault_counts_once():
    check = gh.decide(gh.HealthInputs(kernel_log=XID119), gh.Wanted(indices=[0, 1]))
    assert check.status == pf.FAILED and len(check.problems) == 1
    assert gh.decide(gh.HealthInputs(), gh.Wanted(indices=[0])).status == pf.UNKNOWN


def test_the_servers_gpus():
    assert gh.wanted_gpus({'CUDA_VISIBLE_DEVICES': '2,3'}, [], {'tp-size': 8}).indices == [2, 3]
    uuids = gh.wanted_gpus({'CUDA_VISIBLE_DEVICES': 'GPU-47daa2ad-a218-6286-252b-af45f0dfaf00,junk,4'}, [], {})
    assert (uuids.uuids, uuids.indices) == (['GPU-47daa2ad-a218-6286-252b-af45f0dfaf00'], [])  # CUDA stops at junk
    assert gh.wanted_gpus({}, [], {'tp-size': 2, 'dp-size': 2, 'base-gpu-id': 4}).indices == [4, 5, 6, 7]
    assert gh.wanted_gpus({}, [], {}).indices == [0]


def test_a_kernel_log_file_is_read_from_its_last_boot(tmp_path):
    path = tmp_path / 'kern.log'
    path.write_text('Jan 1 00:00:00 h kernel: [    0.000000] Linux version 6.1.0\n'
                    'Jan 1 00:00:09 h kernel: NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.\n'
                    'Jan 2 00:00:00 h kernel: [    0.000000] Linux version 6.1.0\n'
                    'Jan 2 00:00:05 h kernel: NVRM: Xid (PCI:0000:19:00): 13, pid=1, name=x, Graphics Exception\n')
    log, source = gh.read_kernel_log(None, None, str(path))
    assert source == str(path)
    assert [(e.code, e.pci) for e in xid.parse(log)] == [(13, '0000:19:00')]


def test_a_kernel_log_line_still_being_written_is_read_only_once_whole(tmp_path):
    """rsyslog appends a line in more than one write. Its start alone parses as an Xid with its message cut: a guard
    round would report it so and remember that half as seen, so the whole line is new again at the next round (one
    fault, two events). Read whole lines only: the fault counts once, with its message."""
    path = tmp_path / 'kern.log'
    line = 'Dec 2 14:01:09 h kernel: NVRM: Xid (PCI:0000:9b:00): 119, pid=1797, name=python3, Timeout waiting for RPC\n'
    cut = line.index('name=py')
    path.write_text(line[:cut])
    first, dummy = gh.read_kernel_log(None, None, str(path))
    assert xid.parse(first) == []
    with open(path, 'a', encoding='utf-8') as handle:
        handle.write(line[cut:])
    second, dummy = gh.read_kernel_log(None, None, str(path))
    assert [(e.code, e.pci, e.line.endswith('Timeout waiting for RPC')) for e in xid.parse(second)] == [(119, '0000:9b:00', True)]
