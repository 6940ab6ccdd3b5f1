//! [`Bounded`]: bincode's slice decoder without its byte limit, made safe
//! against length prefixes that claim more than the content holds.
//!
//! bincode guards allocations with a byte limit that it checks on every
//! primitive it reads; for a struct of floats that check is most of the cost
//! of decoding (a 16-`f32` value: 52 ns with the limit, 12 ns without). The
//! only place bincode's serde decoder allocates by a length it has not yet
//! checked is an owned string or byte buffer (`vec![0; len]` before reading
//! `len` bytes); sequences and maps go through serde's visitors, which
//! reserve cautiously and grow as elements arrive. So this wrapper decodes
//! without the limit and asks for every owned string or byte buffer as a
//! borrowed one instead: bincode then checks the length against the bytes
//! left before taking any, and the visitor copies exactly what was there.
//! A prefix that claims more than the content holds is an error, never an
//! allocation. Every other call passes through untouched, wrapped so that
//! the values nested inside are decoded the same way.
//!
//! Every forwarding method is `#[inline]`: without the hint LLVM keeps some
//! of the wrappers as calls, and a 16-`f32` value decodes in 27 ns instead
//! of 19 (`cargo bench --bench codec`, "`content::<T>()`").

use serde::de::{
    DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// A serde deserializer, seed, visitor or access with owned strings and
/// byte buffers read as borrowed ones (see the module).
pub(crate) struct Bounded<T>(pub(crate) T);

/// Deserializer methods whose visitor only ever gets plain values: passed
/// through as they are.
macro_rules! pass {
    ($($method:ident),*) => {$(
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Bounded<D> {
    type Error = D::Error;

    pass!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_bytes,
        deserialize_unit,
        deserialize_identifier,
        deserialize_ignored_any
    );

    #[inline]
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_str(visitor)
    }

    #[inline]
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_bytes(visitor)
    }

    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_option(Bounded(visitor))
    }

    #[inline]
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    #[inline]
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Bounded(visitor))
    }

    #[inline]
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_seq(Bounded(visitor))
    }

    #[inline]
    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Bounded(visitor))
    }

    #[inline]
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Bounded(visitor))
    }

    #[inline]
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(Bounded(visitor))
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, Bounded(visitor))
    }

    #[inline]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Bounded(visitor))
    }

    #[inline]
    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// The visitors of values that contain other values: what they are handed
/// is wrapped in turn. (bincode hands these visitors nothing else.)
impl<'de, V: Visitor<'de>> Visitor<'de> for Bounded<V> {
    type Value = V::Value;

    #[inline]
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.expecting(f)
    }

    #[inline]
    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    #[inline]
    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Bounded(inner))
    }

    #[inline]
    fn visit_newtype_struct<D: Deserializer<'de>>(self, inner: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Bounded(inner))
    }

    #[inline]
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(Bounded(seq))
    }

    #[inline]
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(Bounded(map))
    }

    #[inline]
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(Bounded(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Bounded<S> {
    type Value = S::Value;

    #[inline]
    fn deserialize<D: Deserializer<'de>>(self, inner: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Bounded(inner))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Bounded<A> {
    type Error = A::Error;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Bounded(seed))
    }

    #[inline]
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Bounded<A> {
    type Error = A::Error;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Bounded(seed))
    }

    #[inline]
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Bounded(seed))
    }

    #[inline]
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Bounded<A> {
    type Error = A::Error;
    type Variant = Bounded<A::Variant>;

    #[inline]
    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(Bounded(seed))?;
        Ok((value, Bounded(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Bounded<A> {
    type Error = A::Error;

    #[inline]
    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    #[inline]
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Bounded(seed))
    }

    #[inline]
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Bounded(visitor))
    }

    #[inline]
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Bounded(visitor))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};

    use crate::codec::{decode_value, decode_value_prefix, encode_value, ContentError};

    #[derive(Debug, Clone, Serialize, Deserialize)]
    enum Kind {
        Unit,
        New(String),
        Pair(u8, i64),
        Named { a: Option<String>, b: Vec<u16> },
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Inner(u32);

    /// A value of every shape serde has: strings, bytes, floats, maps,
    /// enums of each kind of variant, options, tuples, newtypes, nesting.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Shape {
        name: String,
        bytes: Vec<u8>,
        floats: [f32; 3],
        map: BTreeMap<String, i32>,
        kinds: Vec<Kind>,
        tuple: (u128, char, bool, i16),
        unit: (),
        inner: Inner,
        nested: Option<Vec<Option<String>>>,
    }

    fn kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::Unit),
            ".{0,8}".prop_map(Kind::New),
            any::<(u8, i64)>().prop_map(|(a, b)| Kind::Pair(a, b)),
            (
                proptest::option::of(".{0,8}"),
                proptest::collection::vec(any::<u16>(), 0..4)
            )
                .prop_map(|(a, b)| Kind::Named { a, b }),
        ]
    }

    fn shape() -> impl Strategy<Value = Shape> {
        (
            ".{0,12}",
            proptest::collection::vec(any::<u8>(), 0..12),
            any::<[f32; 3]>(),
            proptest::collection::btree_map(".{0,4}", any::<i32>(), 0..4),
            proptest::collection::vec(kind(), 0..4),
            any::<(u128, char, bool, i16)>(),
            any::<u32>(),
            proptest::option::of(proptest::collection::vec(
                proptest::option::of(".{0,4}"),
                0..3,
            )),
        )
            .prop_map(
                |(name, bytes, floats, map, kinds, tuple, inner, nested)| Shape {
                    name,
                    bytes,
                    floats,
                    map,
                    kinds,
                    tuple,
                    unit: (),
                    inner: Inner(inner),
                    nested,
                },
            )
    }

    /// What bincode itself makes of `bytes`, with its byte limit: the value
    /// re-encoded (floats may be NaN) and the bytes used, or that it failed.
    fn bincode_reads(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
        let config = bincode::config::standard().with_limit::<{ 1 << 20 }>();
        let (value, used): (Shape, usize) =
            bincode::serde::decode_from_slice(bytes, config).ok()?;
        Some((encode_value(&value).unwrap(), used))
    }

    fn we_read(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
        let (value, used) = decode_value_prefix::<Shape>(bytes).ok()?;
        Some((encode_value(&value).unwrap(), used))
    }

    proptest! {
        /// Every value reads back as bincode reads it.
        #[test]
        fn reads_every_shape_as_bincode_does(value in shape()) {
            let bytes = encode_value(&value).unwrap();
            prop_assert_eq!(we_read(&bytes), Some((bytes.clone(), bytes.len())));
            prop_assert_eq!(we_read(&bytes), bincode_reads(&bytes));
        }

        /// Damaged encodings (a byte changed, bytes cut off or added) are
        /// read, or refused, exactly as bincode reads or refuses them.
        #[test]
        fn damaged_bytes_are_refused_as_bincode_refuses_them(
            value in shape(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
            damage in 0u8..3,
        ) {
            let mut bytes = encode_value(&value).unwrap();
            match damage {
                0 => { let i = at.index(bytes.len()); bytes[i] = byte; }
                1 => bytes.truncate(cut.index(bytes.len())),
                _ => bytes.insert(at.index(bytes.len()), byte),
            }
            prop_assert_eq!(we_read(&bytes), bincode_reads(&bytes));
        }
    }

    /// The attack: a length prefix that claims terabytes, inside whatever
    /// shape, is an error at once, not an allocation.
    #[test]
    fn length_prefix_claiming_terabytes_is_an_error_not_an_allocation() {
        // bincode's varint: 253 then a u64, little endian.
        let mut huge = vec![253u8];
        huge.extend_from_slice(&(1u64 << 40).to_le_bytes());
        let started = Instant::now();
        let string = decode_value::<String>(&huge).unwrap_err();
        assert!(matches!(string, ContentError::Decode { .. }), "{string}");
        // Inside an option, a sequence, a map and an enum's variant.
        let mut some = vec![1u8];
        some.extend_from_slice(&huge);
        assert!(decode_value::<Option<String>>(&some).is_err());
        let mut seq = vec![1u8];
        seq.extend_from_slice(&huge);
        assert!(decode_value::<Vec<String>>(&seq).is_err());
        assert!(decode_value::<BTreeMap<String, u8>>(&seq).is_err());
        let mut variant = vec![1u8];
        variant.extend_from_slice(&huge);
        assert!(decode_value::<Kind>(&variant).is_err());
        // A sequence claiming 2^40 elements reserves cautiously and fails
        // when the bytes run out.
        assert!(decode_value::<Vec<u64>>(&huge).is_err());
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
