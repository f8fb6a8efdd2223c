"""The fast path of inspect_line never disagrees with the full inspection: it answers or defers."""

from __future__ import annotations

import json

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.lineinfo import LineInfo, _fast_inspector, _inspect_full
from hyperdata_sidecar.core.tables import TABLES

from test_core_lineinfo import EVENT_OF, envelope

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _inspect_fast(spec, line: bytes) -> LineInfo | None:
    return _fast_inspector(spec.coin_location)(line)


def agrees(spec, line: bytes) -> bool:
    fast = _inspect_fast(spec, line)
    return fast is None or fast == _inspect_full(spec, line)


@settings(max_examples=300, deadline=None)
@given(spec=st.sampled_from(TABLES), data=st.data())
def test_fast_path_agrees_when_any_value_of_a_real_line_is_replaced(spec, data):
    obj = orjson.loads(envelope([EVENT_OF[spec]()]))
    path = []
    node = obj
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        node = node[key]
    target = obj
    for key in path[:-1]:
        target = target[key]
    if path:
        target[path[-1]] = data.draw(JSON_VALUES)
    assert agrees(spec, json.dumps(obj).encode())


@settings(max_examples=300, deadline=None)
@given(spec=st.sampled_from(TABLES), data=st.data())
def test_fast_path_agrees_when_bytes_of_a_real_line_are_changed(spec, data):
    line = bytearray(envelope([EVENT_OF[spec]()]))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(line) - 1))
        line[at] = data.draw(st.integers(0, 255))
    assert agrees(spec, bytes(line))


@given(st.binary(max_size=200))
def test_fast_path_agrees_on_arbitrary_bytes(line):
    assert all(agrees(spec, line) for spec in TABLES)


def test_fast_path_takes_the_real_lines():
    for spec in TABLES:
        assert type(_inspect_fast(spec, envelope([EVENT_OF[spec]()]))) is LineInfo


def test_invalid_utf8_in_a_skipped_string_is_left_to_the_full_inspection():
    line = envelope([EVENT_OF[TABLES[0]]()])[:-1] + b',"x":"\xff"}'
    assert _inspect_fast(TABLES[0], line) is None
    assert _inspect_full(TABLES[0], line).reason == "malformed"
