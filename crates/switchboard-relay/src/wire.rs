//! bincode's standard encoding by hand, for the few hot paths that read or
//! write relay messages in place: varints (one byte below 251, else a
//! marker for a u16, u32 or u64 that follows, little-endian), zig-zag signed
//! integers, length-prefixed bytes.

/// A cursor over bincode bytes; every read is `None` past the end.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }

    pub(crate) fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    /// Whether everything was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn varint(&mut self) -> Option<u64> {
        let le = |bytes: &[u8]| {
            let mut wide = [0u8; 8];
            wide[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(wide)
        };
        Some(match self.byte()? {
            small @ 0..=250 => u64::from(small),
            251 => le(self.take(2)?),
            252 => le(self.take(4)?),
            253 => le(self.take(8)?),
            _ => return None,
        })
    }

    /// A varint that must fit a u32.
    pub(crate) fn varint_u32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }

    /// A zig-zag signed varint.
    pub(crate) fn signed(&mut self) -> Option<i64> {
        let n = self.varint()?;
        Some((n >> 1) as i64 ^ -((n & 1) as i64))
    }

    /// A length-prefixed string's (or byte vector's) bytes.
    pub(crate) fn text(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        self.take(len)
    }
}

/// Appends bincode's varint of `n`.
pub(crate) fn put_varint(out: &mut Vec<u8>, n: u64) {
    if n <= 250 {
        out.push(n as u8);
    } else if let Ok(n) = u16::try_from(n) {
        out.push(251);
        out.extend_from_slice(&n.to_le_bytes());
    } else if let Ok(n) = u32::try_from(n) {
        out.push(252);
        out.extend_from_slice(&n.to_le_bytes());
    } else {
        out.push(253);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

/// Appends the zig-zag varint of `n`.
pub(crate) fn put_signed(out: &mut Vec<u8>, n: i64) {
    put_varint(out, ((n << 1) ^ (n >> 63)) as u64);
}

/// Appends a length-prefixed string.
pub(crate) fn put_text(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_written_integers_are_bincodes() {
        for n in [0u64, 1, 250, 251, 65_535, 65_536, u32::MAX.into(), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            assert_eq!(out, switchboard::codec::encode_value(&n).unwrap(), "{n}");
            assert_eq!(Reader(&out).varint(), Some(n));
        }
        for n in [0i64, -1, 1, -125, 126, -40_000, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            put_signed(&mut out, n);
            assert_eq!(out, switchboard::codec::encode_value(&n).unwrap(), "{n}");
            assert_eq!(Reader(&out).signed(), Some(n));
        }
        let mut out = Vec::new();
        put_text(&mut out, "héllo");
        assert_eq!(out, switchboard::codec::encode_value("héllo").unwrap());
    }
}
