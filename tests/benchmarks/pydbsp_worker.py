"""PyDBSP peer, run by a Python 3.12 interpreter (pydbsp needs 3.12; the project is 3.11).

Reads one JSON object from stdin: {"rules": [[head, body...], ...] with atoms
`[pred, [term, ...]]` and variables as "?X"; "tasks": [{"name", "add",
"delete"}, ...] with facts `[pred, arg, ...]`}. Runs pydbsp's incremental
stratified Datalog interpreter (`IncrementalDatalogStratified`): per task it
pushes the task's facts with weight +1 / -1 and calls `saturate()` once.
Prints one JSON line per task as soon as it is done ({"task", "seconds",
"facts"}), so a parent that kills it at a time limit keeps the finished tasks.
Imports nothing from the project.
"""

import json
import sys
import time


def main() -> int:
    from pydbsp.datalog_stratified import IncrementalDatalogStratified
    from pydbsp.zset import ZSet

    spec = json.load(sys.stdin)
    d = IncrementalDatalogStratified()
    rules = {tuple((a[0], tuple(a[1])) for a in rule): 1 for rule in spec["rules"]}
    d.push_rules(ZSet(rules))
    for task in spec["tasks"]:
        delta = {(f[0], tuple(f[1:])): 1 for f in task["add"]}
        delta.update({(f[0], tuple(f[1:])): -1 for f in task["delete"]})
        start = time.perf_counter()
        d.push_facts(ZSet(delta))
        out = d.saturate()
        secs = time.perf_counter() - start
        facts = sum(1 for w in out.inner.values() if w > 0)
        print(json.dumps({"task": task["name"], "seconds": secs, "facts": facts}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
