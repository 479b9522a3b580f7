"""The trend exports' formats, as the tools that read them define them: one place for the unit tests of each
reporter and the end-to-end tests that read the files a real run wrote."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

#: The README of benchmark-action/github-action-benchmark ("Examples", custom benchmarks): the file is a JSON array
#: of objects with `name` (string), `unit` (string) and `value` (number), optionally `range` and `extra` (strings;
#: `extra` is shown in the chart's tooltip). The action draws one chart per name, so names are unique too.
BENCHMARK_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "minLength": 1},
            "value": {"type": "number"},
            "range": {"type": "string"},
            "extra": {"type": "string"},
        },
        "required": ["name", "unit", "value"],
        "additionalProperties": False,
    },
}


def validate_benchmark(entries: Any) -> None:
    pytest.importorskip("jsonschema").validate(entries, BENCHMARK_SCHEMA)
    names = [entry["name"] for entry in entries]
    assert len(names) == len(set(names))


#: bencher.dev, "Bencher Metric Format (BMF)": an object keyed by benchmark name, each an object keyed by measure,
#: each holding `value` (number, required), `lower_value` and `upper_value` (numbers). The same page limits a
#: benchmark name to 1024 characters and a measure slug to 64; the slugs here are kebab-case as Bencher's are.
BENCHER_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "propertyNames": {"minLength": 1, "maxLength": 1024},
    "patternProperties": {
        ".+": {
            "type": "object",
            "propertyNames": {"pattern": "^[a-z0-9]+(-[a-z0-9]+)*$", "maxLength": 64},
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                    "additionalProperties": False,
                }
            },
        }
    },
}


def parse_openmetrics(text: str) -> dict[str, dict[str, float]]:
    """family name -> model label -> value, through prometheus_client's OpenMetrics parser (strict: `# EOF`,
    escapes, unit suffixes, one sample per label set)."""
    parser = pytest.importorskip("prometheus_client.openmetrics.parser")
    found: dict[str, dict[str, float]] = {}
    for metric in parser.text_string_to_metric_families(text):
        assert metric.type == "gauge"
        samples = found.setdefault(metric.name, {})
        for sample in metric.samples:
            assert sample.name == metric.name and set(sample.labels) == {"model"}
            assert sample.labels["model"] not in samples
            samples[sample.labels["model"]] = sample.value
    return found


def gitlab_keys(text: str) -> dict[str, str]:
    """What GitLab's metrics parser stores (Gitlab::Ci::Parsers::Metrics::Generic): per line, drop everything
    from the first `#`, split the rest as a shell would, key the first value by the first word."""
    keys: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(re.sub("#.*$", "", line))
        if words and len(words) > 1:
            keys[words[0]] = words[1]
    return keys
