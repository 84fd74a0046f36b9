# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A bounded load through the gateway for the gateway_pd scenario (test tooling): CLIENTS clients, one streamed
/generate request after the other each, until STOP_FILE exists (at most MAX_SECONDS). Prints one JSON line: requests
sent, and the failed ones (HTTP errors, an error event, a stream cut before [DONE]) with what each said.

Usage: python3 pd_load.py URL API_KEY CLIENTS TOKENS STOP_FILE MAX_SECONDS
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.request


def one(url, key, tokens):
    """None when the request succeeded, else why it failed."""
    body = json.dumps({'text': 'load', 'stream': True, 'sampling_params': {'max_new_tokens': tokens}}).encode()
    request = urllib.request.Request(url + '/generate', data=body, headers={
        'content-type': 'application/json', 'authorization': 'Bearer ' + key})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read().decode('utf-8', 'replace')
    except urllib.error.HTTPError as exc:
        return 'HTTP %s' % exc.code
    except OSError as exc:
        return 'cut: %s' % exc
    if '"error"' in text:
        return 'error event: %s' % text[:200]
    if not text.rstrip().endswith('data: [DONE]'):
        return 'stream cut before [DONE]'
    return None


def main(url, key, clients, tokens, stop_file, max_seconds):
    lock = threading.Lock()
    counts = {'sent': 0, 'failed': 0, 'failures': []}
    end = time.monotonic() + float(max_seconds)

    def client():
        while time.monotonic() < end:
            try:
                with open(stop_file):
                    return
            except OSError:
                pass
            why = one(url, key, int(tokens))
            with lock:
                counts['sent'] += 1
                if why:
                    counts['failed'] += 1
                    counts['failures'].append(why)

    threads = [threading.Thread(target=client) for _number in range(int(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts['failures'] = counts['failures'][:20]
    print(json.dumps(counts))


if __name__ == '__main__':
    main(*sys.argv[1:7])
