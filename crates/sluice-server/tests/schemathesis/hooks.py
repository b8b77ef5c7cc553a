"""Schemathesis hooks for the fuzzing run of `sluice serve` (run.sh sets
SCHEMATHESIS_HOOKS=hooks): what the OpenAPI document cannot say by itself."""

import json

import schemathesis


@schemathesis.serializer("application/x-ndjson", "text/csv")
def text_lines(ctx, value):
    """Bodies of batches and uploads (NDJSON, CSV), which schemathesis has no
    serializer for: the schema's strings go as they are; anything else
    (generated to break the schema) as one JSON line."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return (json.dumps(value) + "\n").encode()


@schemathesis.hook
def filter_case(ctx, case):
    """`?complete=1` with `?format=csv` is refused (400: CSV has no room for a
    completion line), a rule between two parameters that OpenAPI cannot state;
    valid requests must not pair them."""
    query = case.query if isinstance(case.query, dict) else {}
    paired = query.get("format") == "csv" and str(query.get("complete")) in ("1", "true")
    return not paired
