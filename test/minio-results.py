"""Counts the results of MinIO's functional test programs (minio-go's
functional_tests.go, minio-py's tests/functional/tests.py), which log one
JSON line per test or test run in the format of MinIO's "mint", and
compares them with a list of expected results.

    minio-results.py --prefix PREFIX --rank A,B,C [--why FIELDS] --expected FILE RESULTS

A test's result is the highest by --rank of its lines' statuses (PASS,
FAIL or NA: the program's name for a test the server answered
501 NotImplemented). Prints one line per test and a count, then every
difference from FILE, and exits 1 if there is one.

FILE lists the tests that are expected not to pass, one a line:

    NAME RESULT REASON...

with RESULT FAIL or NA; every test it does not list is expected to
PASS. A line "tests N" gives the number of tests the program runs, so
that a test that disappears or a new one is noticed too. Lines starting
with # and blank lines are ignored.
"""

import argparse
import collections
import json
import sys

STATUSES = ("PASS", "FAIL", "NA")


def read_results(path, prefix, rank, why_fields):
    """Returns each test's status and why, and its time in ms (the
    longest duration of its lines: each is the time since the test
    started)."""
    tests, ms = {}, collections.Counter()
    for line in open(path, errors="replace"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if not isinstance(j, dict):
            continue
        name, st = j.get("name", "").removeprefix(prefix).strip(), j.get("status")
        if not name or st not in rank:
            continue
        if isinstance(j.get("duration"), (int, float)):
            ms[name] = max(ms[name], j["duration"])
        why = next((str(j[f]) for f in why_fields if j.get(f)), "")
        if name not in tests or rank[st] > rank[tests[name][0]]:
            tests[name] = (st, why[:160])
    return tests, ms


def read_expected(path):
    expected, count, errors = {}, None, []
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if parts[0] == "tests" and len(parts) == 2 and parts[1].isdigit():
            count = int(parts[1])
        elif len(parts) == 3 and parts[1] in ("FAIL", "NA"):
            if parts[0] in expected:
                errors.append(f"{path}:{n}: {parts[0]} is listed twice")
            expected[parts[0]] = parts[1]
        else:
            errors.append(f"{path}:{n}: want NAME FAIL|NA REASON or tests N, not {line!r}")
    if count is None:
        errors.append(f"{path}: no line 'tests N'")
    return expected, count, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", default="", help="the program's prefix of test names")
    ap.add_argument("--rank", required=True, help="statuses from lowest to highest, comma-separated")
    ap.add_argument("--why", default="error,message,alert",
                    help="the fields that say why a test did not pass, the first present is shown")
    ap.add_argument("--expected", required=True, help="the list of tests expected not to pass")
    ap.add_argument("results", help="the program's JSON lines")
    a = ap.parse_args()
    order = a.rank.split(",")
    if sorted(order) != sorted(STATUSES):
        ap.error(f"--rank must order {', '.join(STATUSES)}")
    rank = {st: i for i, st in enumerate(order)}

    tests, ms = read_results(a.results, a.prefix, rank, a.why.split(","))
    for name, (st, why) in tests.items():
        print(f"{st:4} {name}" + (f": {why}" if st != "PASS" else ""))
    c = collections.Counter(st for st, _ in tests.values())
    print(f"\n{len(tests)} tests: {c['PASS']} pass, {c['FAIL']} fail, {c['NA']} not applicable (501)")
    slow = ", ".join(f"{name} {t / 1000:.0f} s" for name, t in ms.most_common(5))
    print(f"The slowest: {slow}")

    expected, count, diffs = read_expected(a.expected)
    for name, (st, _) in tests.items():
        want = expected.get(name, "PASS")
        if st != want:
            if want == "PASS":
                diffs.append(f"{name}: {st}, expected to pass")
            elif st == "PASS":
                diffs.append(f"{name}: now passes, listed as {want}")
            else:
                diffs.append(f"{name}: {st}, listed as {want}")
    for name, want in expected.items():
        if name not in tests:
            diffs.append(f"{name}: listed as {want}, did not run")
    if count is not None and len(tests) != count:
        diffs.append(f"{len(tests)} tests ran, {a.expected} says {count}")
    if diffs:
        print(f"\nNot as expected ({a.expected}):")
        for d in diffs:
            print("  " + d)
        print("If the gateway changed on purpose, update the list and docs/s3.md.")
        return 1
    print(f"As expected ({a.expected}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
