"""Compact transforms: the conformance vectors shared with the Rust relay
(tests/vectors/compact.json) read exactly as the Rust decoder reads them,
and a damaged stream is refused."""

import json
import pathlib
import struct
import unittest

from switchboard_client.bincode import DecodeError
from switchboard_client.compact import CompactDecoder

VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[3] / "tests" / "vectors" / "compact.json").read_text()
)


def as_f32(value):
    """The file's numbers are f32 values written as doubles: compare as f32."""
    if isinstance(value, float):
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if isinstance(value, list):
        return [as_f32(v) for v in value]
    if isinstance(value, dict):
        return {k: as_f32(v) for k, v in value.items()}
    return value


def plain(record):
    if record["type"] == "message":
        return dict(record, content=record["content"].hex())
    return record


class Compact(unittest.TestCase):
    def test_the_compact_vectors_read_as_the_rust_decoder_reads_them(self):
        decoder = CompactDecoder()
        self.assertGreaterEqual(len(VECTORS["frames"]), 4)
        for frame in VECTORS["frames"]:
            got = decoder.read(bytes.fromhex(frame["hex"]))
            self.assertEqual((got["tick"], got["server_time_ms"]), (frame["tick"], frame["server_time_ms"]))
            self.assertEqual(as_f32([plain(r) for r in got["records"]]), as_f32(frame["records"]))
        self.assertEqual(decoder.precision, as_f32(VECTORS["precision"]))

    def test_a_cut_or_damaged_compact_stream_is_a_decode_error(self):
        first = bytes.fromhex(VECTORS["frames"][0]["hex"])
        for cut in range(1, len(first)):
            try:
                records = CompactDecoder().read(first[:cut])["records"]
                self.assertEqual(records, [], cut)
            except DecodeError:
                pass
        with self.assertRaises(DecodeError):
            CompactDecoder().read(bytes.fromhex(VECTORS["frames"][1]["hex"]))
        with self.assertRaisesRegex(DecodeError, "unknown record kind"):
            CompactDecoder().read(bytes.fromhex("0000ff"))


if __name__ == "__main__":
    unittest.main()
