"""What a hostile peer can send the codec: every attack is a clear error,
nothing panics, nothing grows past its limit."""

import unittest
import zlib

from switchboard_client import bincode as b
from switchboard_client.frame import FrameDecoder, FrameError, Limits, decode_frame, encode_frame
from switchboard_client.schemas import Hello, RoomState


class Attacks(unittest.TestCase):
    def test_truncated_values_are_decode_errors(self):
        hello = b.encode(Hello, {"name": "ada", "password": None, "credentials": b"", "resume": None})
        for cut in range(len(hello)):
            with self.subTest(cut=cut), self.assertRaises(b.DecodeError):
                b.decode(Hello, hello[:cut])

    def test_bad_tags_are_decode_errors(self):
        with self.assertRaisesRegex(b.DecodeError, "invalid option tag 2"):
            b.decode(b.option(b.U8), b"\x02\x00")
        with self.assertRaisesRegex(b.DecodeError, "invalid bool 7"):
            b.decode(b.BOOL, b"\x07")
        with self.assertRaisesRegex(b.DecodeError, "too wide for u16"):
            b.decode(b.U16, b"\xfc\x00\x00\x01\x00")
        with self.assertRaisesRegex(b.DecodeError, "unknown variant index 9"):
            b.decode(b.enum_of("A", "B"), b"\x09")
        with self.assertRaisesRegex(b.DecodeError, "invalid UTF-8"):
            b.decode(b.STRING, b"\x02\xc3\x28")
        with self.assertRaisesRegex(b.DecodeError, "bytes left"):
            b.decode(b.U8, b"\x01\x02")

    def test_a_huge_length_prefix_allocates_nothing(self):
        # "a list of 2^32 - 1 rooms" in six bytes: refused before any item.
        claim = b"\x00\xfc\xff\xff\xff\xff"
        with self.assertRaisesRegex(b.DecodeError, "too long"):
            b.decode(b.vec(RoomState), claim[1:])
        with self.assertRaisesRegex(b.DecodeError, "runs past the end"):
            b.decode(b.BYTES, b"\xfd" + (1 << 40).to_bytes(8, "little"))

    def test_a_zlib_bomb_stops_at_the_inflate_limit(self):
        bomb = zlib.compress(bytes(64 * 1024 * 1024), 9)
        self.assertLess(len(bomb), 100_000)
        frame = (len(bomb) + 1).to_bytes(4, "big") + b"\x01" + bomb
        with self.assertRaisesRegex(FrameError, "inflates past the limit of 4194304 bytes"):
            decode_frame(frame)
        small = Limits(max_decompressed_len=1000)
        with self.assertRaisesRegex(FrameError, "past the limit of 1000"):
            FrameDecoder(small).feed(frame)

    def test_a_frame_over_the_length_limit_is_refused_before_its_body(self):
        decoder = FrameDecoder(Limits(max_frame_len=1024))
        with self.assertRaisesRegex(FrameError, "exceeds the limit of 1024"):
            decoder.feed((2_000_000).to_bytes(4, "big"))

    def test_frame_format_errors(self):
        with self.assertRaisesRegex(FrameError, "zero"):
            FrameDecoder().feed(b"\x00\x00\x00\x00")
        with self.assertRaisesRegex(FrameError, "unknown flag bits"):
            FrameDecoder().feed(b"\x00\x00\x00\x02\x04x")
        with self.assertRaisesRegex(FrameError, "corrupt zlib"):
            decode_frame(b"\x00\x00\x00\x04\x01abc")
        body = zlib.compress(b"payload")
        with self.assertRaisesRegex(FrameError, "truncated"):
            decode_frame((len(body)).to_bytes(4, "big") + b"\x01" + body[:-1])
        with self.assertRaisesRegex(FrameError, "after the end"):
            decode_frame((len(body) + 3).to_bytes(4, "big") + b"\x01" + body + b"xx")

    def test_frames_split_anywhere_in_a_stream_come_out_whole(self):
        frames = encode_frame(b"one") + encode_frame(bytes(4000), compress_threshold=512) + encode_frame(b"")
        decoder, out = FrameDecoder(), []
        for i in range(len(frames)):
            out += decoder.feed(frames[i : i + 1])
        self.assertEqual(out, [b"one", bytes(4000), b""])
        self.assertEqual(decoder.pending(), 0)
        self.assertLess(len(encode_frame(bytes(4000), compress_threshold=512)), 100, "compressed when it pays")


if __name__ == "__main__":
    unittest.main()
