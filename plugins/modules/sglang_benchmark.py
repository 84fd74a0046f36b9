#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_benchmark
short_description: Measure a running SGLang server and compare it with the last accepted result
version_added: 0.2.0
description:
  - Sends a fixed load to a running SGLang server (rank 0 of a multi-node server) and measures output and total
    tokens per second, time to first token (TTFT) and inter-token latency (ITL), median and 99th percentile, at
    every level of O(concurrency). Every level runs O(repeats) times; each figure is the median of the runs and the
    spread of output tokens/s over the runs is reported.
  - The load is fixed so that two results can be compared, random prompts of O(input_len) token ids drawn with
    O(seed), O(output_len) output tokens per request (C(ignore_eos)), O(num_prompts) requests per run, and each run
    is bounded by O(duration).
  - With O(client=bench_serving) (or V(auto) when it can be imported), SGLang's own C(python -m sglang.bench_serving)
    of the installed release runs the load (C(--dataset-name random-ids), C(--output-file) JSON). Otherwise a small
    standard-library client streams the same requests to C(POST /generate) and measures them the same way.
  - Where O(nvidia_smi) works, GPU power draw, power limit and utilisation are sampled twice a second during each run
    (mean per GPU).
  - With O(baseline_path), the result is compared with the last accepted result for the same model and load
    (RV(verdict)); with O(update_baseline=true) an accepted result becomes the new baseline.
options:
  url:
    description: Base URL of the server, for example V(http://127.0.0.1:30000) (rank 0 of a multi-node server).
    type: str
    required: true
  api_key:
    description: The server's API key (C(--api-key)), sent as a bearer token in the C(Authorization) header.
    type: str
  model:
    description:
      - Model name used in the baseline key and given to bench_serving as C(--model) (its tokenizer).
      - Default is the C(model_path) the server reports at C(/model_info).
    type: str
  concurrency:
    description: Concurrency levels (requests in flight), each measured in turn.
    type: list
    elements: int
    default: [16]
  input_len:
    description: Input tokens per request.
    type: int
    default: 256
  output_len:
    description: Output tokens per request.
    type: int
    default: 256
  num_prompts:
    description: Requests per run; V(0) sends four rounds of the level's concurrency.
    type: int
    default: 0
  repeats:
    description: Runs per level; figures are medians over them. Use 3 or more to see the noise.
    type: int
    default: 3
  seed:
    description: Seed of the random prompts (the same prompts in every run and on every host).
    type: int
    default: 1
  dataset:
    description:
      - bench_serving's dataset. V(random-ids) draws token ids itself; V(random) downloads ShareGPT first to cut prompts
        from (needs network access). The built-in client always sends random token ids.
    type: str
    choices: [random-ids, random]
    default: random-ids
  duration:
    description: Upper bound of one run in seconds; requests not sent by then are not sent, bench_serving is stopped.
    type: float
    default: 300
  request_timeout:
    description: Seconds a single request of the built-in client may take.
    type: float
    default: 120
  client:
    description:
      - V(bench_serving) runs C(python -m sglang.bench_serving) with O(python) and fails when it cannot.
      - V(builtin) uses the standard-library client.
      - V(auto) uses bench_serving when O(python) can import it (SGLang with its dependencies), else the built-in client.
    type: str
    choices: [auto, bench_serving, builtin]
    default: auto
  python:
    description: Interpreter of the environment SGLang is installed in, for bench_serving.
    type: path
  nvidia_smi:
    description:
      - Command that answers C(nvidia-smi --query-gpu=power.draw,power.limit,utilization.gpu --format=csv,noheader,nounits).
      - An empty list disables power sampling; a command that fails leaves the power figures empty.
    type: list
    elements: str
    default: [nvidia-smi]
  baseline_path:
    description:
      - JSON file of the accepted results, one per model and load (mode C(0600), replaced atomically). Without it no
        comparison is made.
    type: path
  threshold:
    description: A drop of median output tokens/s of more than this many percent, at any level, is a regression.
    type: float
    default: 10
  update_baseline:
    description: Write the result to O(baseline_path) as the new baseline when the verdict accepts it.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Sends no load and writes nothing; returns the baseline it would compare with.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Every run measures again; with O(update_baseline=true) an accepted result replaces the baseline.
notes:
  - The load is real work for the server; run it on a server that takes no production traffic, or with a small load.
  - Figures of different clients, models or loads are never compared; the baseline key holds the model and load.
seealso:
  - module: llmops.sglang.wait_for_sglang
  - module: llmops.sglang.sglang_deploy_stamp
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Benchmark the server and compare with the last accepted result
  llmops.sglang.sglang_benchmark:
    url: http://127.0.0.1:30000
    python: /opt/sglang/venv/bin/python
    concurrency: [64, 512]
    input_len: 1024
    output_len: 512
    repeats: 3
    baseline_path: /var/lib/sglang/sglang.benchmark.json
    threshold: 10
    update_baseline: true
  register: bench

- name: Say what it measured
  ansible.builtin.debug:
    msg: "{{ bench.summary }} ({{ bench.verdict.status }})"
'''

RETURN = r'''
result:
  description:
    - The measurement; V(null) in check mode. C(levels) holds per level the medians (C(output_tps), C(total_tps),
      C(ttft_p50_ms), C(ttft_p99_ms), C(itl_p50_ms), C(itl_p99_ms), C(power_w), C(power_limit_w), C(gpu_util_pct)),
      C(spread_pct) and every run.
  returned: always
  type: dict
  sample: {"key": "model=zai-org/GLM-5-FP8 concurrency=64 dataset=random-ids input_len=256 num_prompts=0 output_len=256 seed=1",
           "model": "zai-org/GLM-5-FP8", "client": "builtin", "measured_at": "2026-12-01T14:02:03Z",
           "load": {"concurrency": [64], "input_len": 256, "output_len": 256, "num_prompts": 0, "seed": 1, "dataset": "random-ids"},
           "levels": [{"concurrency": 64, "output_tps": 1859.2, "total_tps": 3718.4, "ttft_p50_ms": 152.0,
                       "ttft_p99_ms": 301.0, "itl_p50_ms": 33.9, "itl_p99_ms": 41.0, "power_w": 248.0,
                       "power_limit_w": 600.0, "gpu_util_pct": 97.0, "spread_pct": 1.4, "runs": []}]}
baseline:
  description: The accepted result it was compared with (same shape as RV(result)); V(null) when there is none.
  returned: always
  type: dict
  sample: null
damaged:
  description:
    - The file at O(baseline_path) when it was not a store of accepted results (not JSON, another format, a field of the
      wrong type), else V(null). It is renamed to C(<path>.damaged-<UTC time>) (not in check mode), this run has no
      baseline, and the next accepted result starts the store anew; a warning says so.
  returned: always
  type: dict
  sample: null
verdict:
  description:
    - The comparison; V(null) without O(baseline_path) or in check mode. C(status) is V(first) (no baseline for this
      model and load), V(accepted) or V(regressed); C(change_pct) the worst change of median output tokens/s over the
      levels; C(noisy) that the runs spread more than O(threshold).
  returned: always
  type: dict
  sample: {"status": "regressed", "accepted": false, "threshold_pct": 10.0, "change_pct": -87.36, "baseline_tps": 1867.0,
           "current_tps": 236.0, "concurrency": 64, "noisy": false}
summary:
  description: One line for a person at a terminal.
  returned: always
  type: str
  sample: "236 tok/s against 1867 (-87 %) at concurrency 64, spread 2 % over 3 runs"
headline:
  description: The short form of RV(summary) (median output tokens/s at the highest level, against the baseline's).
  returned: always
  type: str
  sample: "236 tok/s against 1867 (-87 %)"
client:
  description: The client that ran the load, and why when O(client=auto) chose the built-in one.
  returned: always
  type: dict
  sample: {"name": "builtin", "reason": "/opt/sglang/venv/bin/python cannot import sglang.bench_serving: No module named 'numpy'"}
gpu:
  description: Why power figures are missing (C(error)), or V(null) when they were sampled or not asked for.
  returned: always
  type: dict
  sample: {"error": "nvidia-smi gave no GPU figures (rc=127): No such file or directory"}
baseline_updated:
  description: Whether the result was written to O(baseline_path) as the new baseline (also what RV(ignore:changed) says).
  returned: always
  type: bool
  sample: true
'''

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _serving as bs
from ansible_collections.llmops.sglang.plugins.module_utils.bench import _run as bm
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _probe as probe
from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import StreamingClient
from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import decide, load_key
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import C_ENV, module_runner


def _model(module):
    if module.params['model']:
        return module.params['model']
    answer = probe.http_get(module.params['url'], '/model_info', api_key=module.params['api_key'], timeout=10)
    try:
        return json.loads(answer['body'])['model_path']
    except (TypeError, ValueError, KeyError):
        module.fail_json(msg='Cannot read the model from %s (status %s, %s); is the server up? Pass model to name it.'
                         % (answer['url'], answer['status'], answer['error'] or 'no model_path in the answer'), http=answer)


def _choose_client(module):
    """(name, reason) of the client that runs the load."""
    wanted, python = module.params['client'], module.params['python']
    if wanted == 'builtin':
        return 'builtin', None
    if not python:
        if wanted == 'bench_serving':
            module.fail_json(msg='client=bench_serving needs python, the interpreter SGLang is installed in.')
        return 'builtin', 'no python given to run sglang.bench_serving with'
    rc, out, err = module_runner(module)([python, '-c', 'import sglang.bench_serving'])
    if rc == 0:
        return 'bench_serving', None
    reason = '%s cannot import sglang.bench_serving: %s' % (python, ((err or out).strip().splitlines() or ['rc=%d' % rc])[-1])
    if wanted == 'bench_serving':
        module.fail_json(msg=reason + '. Install SGLang with its dependencies there, or use client=builtin.', rc=rc)
    return 'builtin', reason


def _bench_serving_runner(module, load, model):
    p = module.params

    def run_level(concurrency, num_prompts):
        out_file = os.path.join(module.tmpdir, 'bench-%d.jsonl' % concurrency)
        if os.path.exists(out_file):
            os.unlink(out_file)  # bench_serving appends
        argv = ['timeout', '-k', '10', '%d' % max(1, int(p['duration']))]
        argv += bs.bench_serving_argv(p['python'], p['url'], dict(load.__dict__, num_prompts=num_prompts), concurrency,
                                      load.seed, out_file, model)
        # bench_serving reads the API key from the environment (OPENAI_API_KEY), never from its command line
        env = dict(C_ENV, OPENAI_API_KEY=p['api_key']) if p['api_key'] else dict(C_ENV)
        rc, out, err = module.run_command(argv, check_rc=False, cwd='/', environ_update=env)
        try:
            with open(out_file, 'r', encoding='utf-8') as handle:
                return bs.parse_output(handle.read(), concurrency, num_prompts)
        except (OSError, bs.BenchServingError) as exc:
            why = 'ran longer than duration=%ss and was stopped' % p['duration'] if rc == 124 else 'exited with rc=%d' % rc
            module.fail_json(msg='sglang.bench_serving %s and left no result: %s' % (why, getattr(exc, 'msg', exc)),
                             cmd=argv, rc=rc, stdout=out[-4000:], stderr=err[-4000:])
    return run_level


def _builtin_runner(module, load):
    p = module.params
    client = StreamingClient(p['url'], api_key=p['api_key'], request_timeout=p['request_timeout'])

    def run_level(concurrency, num_prompts):
        return client.run(concurrency, num_prompts, load.input_len, load.output_len, load.seed,
                          deadline=client.clock() + p['duration'])
    return run_level


def _sampler_factory(module, samplers):
    if not module.params['nvidia_smi']:
        return None

    def run(argv):
        # A missing nvidia-smi (no GPU driver) is a missing figure, not a failed benchmark.
        try:
            return module.run_command(argv, check_rc=False, environ_update=dict(C_ENV), handle_exceptions=False)
        except OSError as err:
            return 127, '', '%s: %s' % (argv[0], err)

    def factory():
        sampler = bs.GpuSampler(module.params['nvidia_smi'], run)
        samplers.append(sampler)
        return sampler
    return factory


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            model=dict(type='str'),
            concurrency=dict(type='list', elements='int', default=[16]),
            input_len=dict(type='int', default=256),
            output_len=dict(type='int', default=256),
            num_prompts=dict(type='int', default=0),
            repeats=dict(type='int', default=3),
            seed=dict(type='int', default=1),
            dataset=dict(type='str', choices=['random-ids', 'random'], default='random-ids'),
            duration=dict(type='float', default=300.0),
            request_timeout=dict(type='float', default=120.0),
            client=dict(type='str', choices=['auto', 'bench_serving', 'builtin'], default='auto'),
            python=dict(type='path'),
            nvidia_smi=dict(type='list', elements='str', default=['nvidia-smi']),
            baseline_path=dict(type='path'),
            threshold=dict(type='float', default=10.0),
            update_baseline=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    load = bm.Load(concurrency=p['concurrency'], input_len=p['input_len'], output_len=p['output_len'],
                   num_prompts=p['num_prompts'], repeats=p['repeats'], seed=p['seed'], dataset=p['dataset'])
    try:
        load.check()
        model = _model(module)
        store, damage = bm.read_store(p['baseline_path'], module.check_mode) if p['baseline_path'] else ({}, None)
        if damage:
            module.warn(damage.message('benchmark store'))
        baseline = store.get(load_key(model, load.key_fields()))
        empty = dict(changed=False, result=None, verdict=None, client=None, gpu=None, baseline_updated=False,
                     baseline=baseline.to_json() if baseline else None, damaged=damage.to_json() if damage else None)
        if module.check_mode:
            module.exit_json(summary='check mode: no load sent', headline='', **empty)
        name, reason = _choose_client(module)
        runner = _bench_serving_runner(module, load, model) if name == 'bench_serving' else _builtin_runner(module, load)
        samplers = []
        result = bm.measure(load, model, name, runner, _sampler_factory(module, samplers))
        verdict = decide(baseline, result, p['threshold']) if p['baseline_path'] else None
        updated = bool(p['update_baseline'] and verdict is not None and verdict.accepted)
        if updated:
            store[result.key] = result
            bm.write_store(p['baseline_path'], store)
        gpu_error = next((s.error for s in samplers if s.error), None)
        empty.update(changed=updated, baseline_updated=updated, result=result.to_json(),
                     verdict=verdict.to_json() if verdict else None, client={'name': name, 'reason': reason},
                     gpu={'error': gpu_error} if gpu_error else None)
        module.exit_json(summary=bm.summary(result, verdict), headline=bm.headline(result, verdict), **empty)
    except bm.BenchmarkError as err:
        module.fail_json(msg=err.msg)


if __name__ == '__main__':
    main()
