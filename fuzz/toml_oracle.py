#!/usr/bin/python3
"""The oracle for cued's TOML parser: Python's tomllib (TOML 1.0). Reads a JSON
array of documents on stdin, writes a JSON array of results: null where tomllib
rejects the document, else its value tree with every value tagged by type
(dates and times only as their type: cued keeps them as text)."""
import json
import math
import sys
import tomllib
import datetime


def tag(v):
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        # TOML 1.0: an integer that does not fit 64 bits must be an error.
        if not -2**63 <= v < 2**63:
            raise ValueError("integer out of range")
        return {"int": str(v)}
    if isinstance(v, float):
        if math.isnan(v):
            return {"float": "nan"}
        return {"float": repr(v)}
    if isinstance(v, str):
        return {"string": v}
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return {"datetime": True}
    if isinstance(v, list):
        return {"array": [tag(x) for x in v]}
    if isinstance(v, dict):
        return {"table": {k: tag(x) for k, x in v.items()}}
    raise TypeError(type(v))


out = []
sys.stdin.reconfigure(encoding="utf-8", errors="surrogatepass")
for doc in json.load(sys.stdin):
    try:
        out.append(tag(tomllib.loads(doc)))
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        out.append(None)
sys.stdout.reconfigure(encoding="utf-8")
json.dump(out, sys.stdout, ensure_ascii=False)
