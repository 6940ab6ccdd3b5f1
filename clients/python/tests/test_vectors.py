"""The wire vectors shared with the Rust and JavaScript tests
(tests/vectors/wire.json): every value encodes to exactly the file's bytes,
and the bytes decode to exactly the value."""

import json
import math
import pathlib
import unittest

from switchboard_client import bincode as b
from switchboard_client import frame, schemas as s

VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[3] / "tests" / "vectors" / "wire.json").read_text()
)

SCHEMAS = {
    "u8": b.U8,
    "u16": b.U16,
    "u32": b.U32,
    "u64": b.U64,
    "i32": b.I32,
    "i64": b.I64,
    "f32": b.F32,
    "f64": b.F64,
    "bool": b.BOOL,
    "string": b.STRING,
    "bytes": b.BYTES,
    "option<string>": b.option(b.STRING),
    "vec<u32>": b.vec(b.U32),
    "map<string,string>": b.map_of(b.STRING, b.STRING),
    "ClientId": b.UUID,
    "vec<RoomSummary>": b.vec(s.RoomSummary),
}


def schema_of(name):
    return SCHEMAS.get(name) or getattr(s, name)


def plain(value):
    """Values as JSON has them: bytes as lists of numbers."""
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Vectors(unittest.TestCase):
    def test_the_file_has_vectors_of_every_kind(self):
        self.assertGreater(len(VECTORS), 40)
        for vector in VECTORS:
            if vector["type"] != "Frame":
                self.assertIsNotNone(schema_of(vector["type"]), vector["type"])

    def test_every_value_vector_decodes_and_encodes_byte_for_byte(self):
        for vector in (v for v in VECTORS if v["type"] != "Frame"):
            with self.subTest(vector["name"]):
                schema = schema_of(vector["type"])
                data = bytes.fromhex(vector["hex"])
                decoded = plain(b.decode(schema, data))
                expected = vector["value"]
                if isinstance(expected, float):
                    self.assertTrue(math.isclose(decoded, expected, rel_tol=1e-7))
                else:
                    self.assertEqual(decoded, expected)
                self.assertEqual(b.encode(schema, vector["value"]).hex(), vector["hex"])

    def test_every_frame_vector_splits_inflates_and_encodes(self):
        for vector in (v for v in VECTORS if v["type"] == "Frame"):
            with self.subTest(vector["name"]):
                data = bytes.fromhex(vector["hex"])
                compressed, _ = frame.split_frame(data)
                self.assertEqual(compressed, vector["value"]["compressed"])
                self.assertEqual(frame.decode_frame(data).hex(), vector["value"]["payload"])
                if not compressed:
                    payload = bytes.fromhex(vector["value"]["payload"])
                    self.assertEqual(frame.encode_frame(payload).hex(), vector["hex"])


if __name__ == "__main__":
    unittest.main()
