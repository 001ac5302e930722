//! The protobuf wire format of the records, read and written field by field.
//!
//! Decoding a record with prost copies each of its texts into a string of its own; the
//! compactor buffers a million rows, and dropping them frees each text again
//! (docs/adr/0001-hand-written-codec.md). A record's view reads its fields straight from the
//! bytes with [`Reader`] and writes them with [`Writer`]. Both follow prost exactly, which the
//! records' tests check against prost itself.

use prost::encoding::{WireType, encode_key, encode_varint};

/// How a text field is read from a record's bytes: as `&str` (checked as UTF-8 on the spot) or
/// as the bytes it is stored as (for code that checks many texts at once).
pub trait Text<'a>: Sized + Copy + Default {
    /// The text of these bytes; `None` when they are not one.
    fn read(bytes: &'a [u8]) -> Option<Self>;
}

impl<'a> Text<'a> for &'a str {
    fn read(bytes: &'a [u8]) -> Option<Self> {
        std::str::from_utf8(bytes).ok()
    }
}

impl<'a> Text<'a> for &'a [u8] {
    fn read(bytes: &'a [u8]) -> Option<Self> {
        Some(bytes)
    }
}

/// A text as a [`Writer`] writes it: its length and its bytes, which need not lie in memory as
/// one slice (the collector writes its binary ids as hex digits straight into the record).
pub trait WireText {
    /// The length of the text in bytes.
    fn wire_len(&self) -> usize;
    /// Appends the text's bytes to `out`.
    fn write_to(&self, out: &mut Vec<u8>);
}

impl WireText for &str {
    #[inline]
    fn wire_len(&self) -> usize {
        self.len()
    }

    #[inline]
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
}

impl WireText for &[u8] {
    #[inline]
    fn wire_len(&self) -> usize {
        self.len()
    }

    #[inline]
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

/// Whether `text` is UTF-8. Most texts are ASCII, which is checked a word at a time; a short
/// text's full UTF-8 check goes byte by byte.
#[inline]
pub fn is_utf8(text: &[u8]) -> bool {
    text.is_ascii() || std::str::from_utf8(text).is_ok()
}

/// A cursor over a record's bytes. Every read is `None` when the bytes end too soon or are not
/// what prost would accept.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Whether every byte has been read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// A varint as prost reads it: at most ten bytes, the tenth at most 1.
    #[inline]
    pub fn varint(&mut self) -> Option<u64> {
        // Most are one byte: every key of fields 1 to 15 and every length below 128.
        let first = *self.bytes.get(self.at)?;
        if first < 0x80 {
            self.at += 1;
            return Some(u64::from(first));
        }
        let mut value = 0_u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.bytes.get(self.at)?;
            self.at += 1;
            if shift == 63 && byte > 1 {
                return None;
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(value);
            }
        }
        None
    }

    /// A `uint32`: the low 32 bits of a varint, as prost keeps them.
    #[inline]
    pub fn uint32(&mut self) -> Option<u32> {
        self.varint()
            .map(|value| (value & u64::from(u32::MAX)) as u32)
    }

    /// An `int32`: the low 32 bits of a varint as a signed number, as prost keeps them.
    #[inline]
    pub fn int32(&mut self) -> Option<i32> {
        self.uint32().map(|value| value as i32)
    }

    /// A `fixed64`: eight bytes, little-endian.
    #[inline]
    pub fn fixed64(&mut self) -> Option<u64> {
        let end = self.at.checked_add(8)?;
        let bytes: [u8; 8] = self.bytes.get(self.at..end)?.try_into().ok()?;
        self.at = end;
        Some(u64::from_le_bytes(bytes))
    }

    /// A length-delimited text, read as `T`.
    #[inline]
    pub fn text<T: Text<'a>>(&mut self) -> Option<T> {
        let len = usize::try_from(self.varint()?).ok()?;
        let end = self.at.checked_add(len)?;
        let text = T::read(self.bytes.get(self.at..end)?)?;
        self.at = end;
        Some(text)
    }
}

/// The bytes of a field's key.
#[inline]
fn key_len(tag: u32) -> usize {
    prost::encoding::key_len(tag)
}

/// The bytes a varint field takes as [`Writer::varint`] writes it (none at zero).
#[inline]
pub fn varint_len(tag: u32, value: u64) -> usize {
    if value == 0 {
        0
    } else {
        optional_varint_len(tag, value)
    }
}

/// The bytes a present `optional` varint field takes.
#[inline]
pub fn optional_varint_len(tag: u32, value: u64) -> usize {
    key_len(tag) + prost::encoding::encoded_len_varint(value)
}

/// The bytes a `fixed64` field takes as [`Writer::fixed64`] writes it (none at zero).
#[inline]
pub fn fixed64_len(tag: u32, value: u64) -> usize {
    if value == 0 { 0 } else { key_len(tag) + 8 }
}

/// The bytes a text field of `len` bytes takes as [`Writer::text`] writes it (none when empty).
#[inline]
pub fn text_len(tag: u32, len: usize) -> usize {
    if len == 0 {
        0
    } else {
        optional_text_len(tag, len)
    }
}

/// The bytes a present `optional` text field of `len` bytes takes.
#[inline]
pub fn optional_text_len(tag: u32, len: usize) -> usize {
    key_len(tag) + prost::encoding::encoded_len_varint(len as u64) + len
}

/// A protobuf message written field by field, in tag order, as prost writes it: a plain proto3
/// field at its default value (zero, empty) is left out, an `optional` one is written whenever
/// present.
pub struct Writer(Vec<u8>);

impl Writer {
    /// A writer whose buffer holds `capacity` bytes before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        Self(Vec::with_capacity(capacity))
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// A varint field (`uint32`, `uint64`, `bool`), left out at zero.
    #[inline]
    pub fn varint(&mut self, tag: u32, value: u64) {
        if value != 0 {
            self.optional_varint(tag, Some(value));
        }
    }

    /// An `int32` field, left out at zero; a negative value takes ten bytes, sign-extended.
    #[inline]
    pub fn int32(&mut self, tag: u32, value: i32) {
        self.varint(tag, i64::from(value) as u64);
    }

    /// An `optional` varint field, written whenever present.
    #[inline]
    pub fn optional_varint(&mut self, tag: u32, value: Option<u64>) {
        if let Some(value) = value {
            encode_key(tag, WireType::Varint, &mut self.0);
            encode_varint(value, &mut self.0);
        }
    }

    /// A `fixed64` field, left out at zero.
    #[inline]
    pub fn fixed64(&mut self, tag: u32, value: u64) {
        if value != 0 {
            encode_key(tag, WireType::SixtyFourBit, &mut self.0);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// A `string` or `bytes` field, left out when empty.
    #[inline]
    pub fn text(&mut self, tag: u32, value: &impl WireText) {
        if value.wire_len() != 0 {
            self.optional_text(tag, Some(value));
        }
    }

    /// An `optional` `string` field, written whenever present, even when empty.
    #[inline]
    pub fn optional_text(&mut self, tag: u32, value: Option<&impl WireText>) {
        if let Some(value) = value {
            encode_key(tag, WireType::LengthDelimited, &mut self.0);
            encode_varint(value.wire_len() as u64, &mut self.0);
            value.write_to(&mut self.0);
        }
    }
}
