"""UBI logging under faults: a writer killed mid-stream loses at most the line it was writing and the import
never reads a torn line as data; a full disk stops logging with one line while the searches go on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from workbench.traffic.importer import read_logs

_WRITE = r"""
import sys
from pathlib import Path
from workbench.traffic.log import TrafficLog
log = TrafficLog(Path(sys.argv[1]), max_bytes=1 << 30)
print("ready", flush=True)
i = 0
while True:
    log.searched(f"id:{i % 5}", "карма йога " + "x" * (i % 3000), [f"d{j}" for j in range(10)])
    i += 1
"""


def test_a_writer_killed_mid_stream_leaves_whole_lines_or_one_torn_last_line(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _WRITE, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    raw = (tmp_path / "ubi_queries.jsonl").read_bytes()
    lines = raw.split(b"\n")
    whole = [json.loads(x) for x in lines[:-1]]  # every line but the last is whole JSON
    assert len(whole) > 100 and all(r["user_query"].startswith("карма йога") for r in whole)
    queries, _events, report = read_logs([tmp_path], "k")
    assert len(queries) == len(whole)  # a torn tail is never read as data
    skipped = report.as_dict()["skipped"]
    assert set(skipped) <= {"a torn last line"} and (lines[-1] == b"") == (not skipped)


def test_a_full_disk_stops_logging_with_one_line_and_searches_go_on(tmp_path):
    from workbench.live.serve import Searcher
    from workbench.traffic.log import TrafficLog

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    (tmp_path / "ubi").mkdir()
    (tmp_path / "ubi" / "ubi_queries.jsonl").symlink_to("/dev/full")  # every write: ENOSPC
    said: list[str] = []
    s = Searcher.__new__(Searcher)  # the answer path only: a search that always finds one hit
    s.traffic, s._log, s._log_failed = TrafficLog(tmp_path / "ubi"), said.append, False
    s.search = lambda text, k, filters: {"config": "c", "dataset": "d", "query": text,
                                         "hits": [{"rank": 1, "doc_id": "bg2.47"}]}
    answers = [s.answer(f"q{i}", 1, None, "id:r") for i in range(5)]
    assert all(a["ok"] and a["result"]["hits"][0]["doc_id"] == "bg2.47" and "query_id" not in a["result"]
               for a in answers)
    assert len(said) == 1 and "the UBI log cannot be written" in said[0] and "No space left" in said[0]
