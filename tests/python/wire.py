"""Just enough of the protobuf wire format to write and read messages byte for byte.

The generated Python classes re-encode whatever they parse, so they cannot show whether the server passed bytes
through untouched. These helpers build a `google.protobuf.Struct` in an unusual but valid encoding and find the
exact bytes of a field inside an encoded message.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, wire_type: int, payload: bytes | int) -> bytes:
    key = varint(number << 3 | wire_type)
    if wire_type == VARINT:
        return key + varint(int(payload))
    if wire_type == LEN:
        assert isinstance(payload, bytes)
        return key + varint(len(payload)) + payload
    assert isinstance(payload, bytes)
    return key + payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) for each field in order; LEN values are the raw bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, pos = _read_varint(data, pos)
        elif wire_type == I64:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire_type == I32:
            value, pos = data[pos:pos + 4], pos + 4
        elif wire_type == LEN:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
        yield number, wire_type, value


def only(data: bytes, number: int) -> bytes | None:
    """The bytes of the single LEN field `number`, or None when absent."""
    found = [value for n, wire_type, value in fields(data) if n == number and wire_type == LEN]
    assert len(found) <= 1, f"field {number} occurs {len(found)} times"
    return found[0] if found else None


def map_entries(data: bytes, number: int) -> dict[str, bytes]:
    """A `map<string, Message>` field: each key with the exact bytes of its value."""
    entries = {}
    for n, wire_type, entry in fields(data):
        if n == number and wire_type == LEN:
            key = only(entry, 1) or b""
            entries[key.decode()] = only(entry, 2) or b""
    return entries


# google.protobuf.Struct / Value / ListValue, written in reverse key order (the canonical encoders sort or keep
# insertion order, so a server that re-encodes cannot reproduce these bytes by accident).

def struct_bytes(obj: dict) -> bytes:
    return b"".join(field(1, LEN, field(1, LEN, key.encode()) + field(2, LEN, value_bytes(value)))
                    for key, value in sorted(obj.items(), reverse=True))


def value_bytes(value: Any) -> bytes:
    if value is None:
        return field(1, VARINT, 0)
    if isinstance(value, bool):
        return field(4, VARINT, int(value))
    if isinstance(value, (int, float)):
        return field(2, I64, struct.pack("<d", float(value)))
    if isinstance(value, str):
        return field(3, LEN, value.encode())
    if isinstance(value, dict):
        return field(5, LEN, struct_bytes(value))
    if isinstance(value, list):
        return field(6, LEN, b"".join(field(1, LEN, value_bytes(item)) for item in value))
    raise TypeError(f"cannot encode {type(value).__name__} as a protobuf Value")
