"""Splitting a serialized list into element encodings, and joining them back.

The saver stores each list element as its own blob: the slices must be byte-for-byte
what LangGraph's serializer writes for the element alone (so an unchanged message stays
the same git blob), including the msgpack ext types ormsgpack writes for pydantic
models, dataclasses, datetimes and LangGraph's own types.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid

import msgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Send
from pydantic import BaseModel

from got_integrations.langgraph._layout import join_msgpack_array, split_msgpack_array


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    label: str


class Model(BaseModel):
    name: str
    tags: list[str]


def _values() -> list[object]:
    return [
        AIMessage("hi", id="1", tool_calls=[{"name": "calc", "args": {"x": 1}, "id": "c1"}]),
        ToolMessage("42", tool_call_id="c1"),
        HumanMessage("é" * 40000),  # str32 inside an ext32
        Point(3, "p"),
        Model(name="m", tags=["a", "b"]),
        Send("node", {"arg": 1}),
        datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC),
        datetime.date(2024, 5, 1),
        uuid.UUID(int=7),
        Color.RED,
        {1, 2, 3},
        (4, 5),
        {"a": [1, 2.5, None], "b": {"c": True}},
        b"\xc1" * 300,
        [1, [2, [3, [4]]]],
        2**63,
        -(2**40),
        3.25,
        None,
        "",
    ]


def test_every_slice_is_the_element_own_encoding_ext_types_included():
    serde = JsonPlusSerializer()
    values = _values()
    tag, data = serde.dumps_typed(values)
    parts = split_msgpack_array(data)
    assert tag == "msgpack" and parts is not None
    assert parts == [serde.dumps_typed([v])[1][1:] for v in values]
    # the ext payloads were passed over, not interpreted: several elements are ext types
    assert sum(1 for p in parts if p[0] in (0xC7, 0xC8, 0xC9) or 0xD4 <= p[0] <= 0xD8) >= 5
    assert serde.loads_typed(("msgpack", join_msgpack_array(parts))) == serde.loads_typed((tag, data))


@pytest.mark.parametrize("length", [0, 1, 15, 16, 65535, 65536])
def test_split_and_join_are_inverse_across_array_header_sizes(length: int):
    items = [msgpack.packb(i % 300) for i in range(length)]  # fixint and uint16 encodings
    data = msgpack.packb([i % 300 for i in range(length)])
    assert join_msgpack_array(items) == data
    assert split_msgpack_array(data) == items


def test_raw_ext_payload_bytes_are_never_read_as_msgpack():
    # a payload made of array headers and invalid bytes: walking into it would fail
    ext = msgpack.packb(msgpack.ExtType(5, b"\xdd\xff\xff\xff\xff\xc1"))
    big = msgpack.packb(msgpack.ExtType(9, b"\xc1" * 70000))  # ext32
    assert split_msgpack_array(b"\x93" + ext + big + b"\x01") == [ext, big, b"\x01"]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x81\xa1a\x01",  # not an array
        b"\x92\x01",  # truncated: fewer elements than the header says
        b"\x91\xa5abc",  # truncated inside an element
        b"\x91\x01\x02",  # trailing bytes after the array
        b"\x91\xc1",  # 0xc1 is never msgpack
        b"\xdd\xff\xff\xff\xff",  # a header announcing four billion elements, none present
    ],
)
def test_anything_but_one_whole_array_is_refused(data: bytes):
    assert split_msgpack_array(data) is None
