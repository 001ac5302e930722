//! The builders of a row record's columns, one kind per way a field is stored.
//!
//! A record's declaration names each field's builder; the field's value in the view picks the
//! conversion:
//! - [`Text`], [`OptText`]: a string column, built from texts given as bytes and checked as
//!   UTF-8 once, as a whole, when finished (checking each short text on its own took longer
//!   than building the column);
//! - [`Time`]: Unix nanoseconds into a UTC timestamp in microseconds (Delta Lake's `timestamp`
//!   holds microseconds; the last three digits are cut);
//! - [`Long`], [`OptLong`]: an unsigned count into a signed 64-bit column (Delta Lake has no
//!   unsigned type; the rows' checks refuse a value past `i64::MAX` before a batch is built);
//! - [`OptInt`]: an optional `uint32` into a signed 32-bit column (likewise checked);
//! - [`TemporalityText`]: a counter point's temporality as its stored spelling.
//!
//! Each builder reads its column back as well ([`Read`]): a table's rows, read from its files,
//! become the same views the Kafka records gave (texts borrowed from the batch), so a reader of
//! the tables applies them with the code that applies the stream.

use std::sync::Arc;

use arrow_array::builder::{Int32Builder, Int64Builder, NullBufferBuilder};
use arrow_array::{
    Array, ArrayRef, Int32Array, Int64Array, LargeStringArray, RecordBatch, StringArray,
    StringViewArray, TimestampMicrosecondArray,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, TimeUnit};

use crate::proto::Temporality;

/// What every column builder does, whatever it is given.
pub trait Build {
    /// The column's Arrow field.
    fn field(name: &str) -> Field;
    /// The finished column.
    fn finish(self) -> Result<ArrayRef, ArrowError>;
}

/// A column builder that takes values of type `V`.
pub trait Column<V>: Build {
    /// A builder for `rows` values, sized from the first value when given.
    fn with_capacity(rows: usize, first: Option<V>) -> Self;
    /// Appends a value.
    fn push(&mut self, value: V);
}

/// A column read back from a batch as the values its builder takes: the inverse of [`Column`].
pub trait Read<'a, V>: Build {
    /// The column, found in a batch.
    type Reader: Copy;
    /// Finds column `name` in `batch`; an error when it is absent or of another type.
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError>;
    /// The value of row `row` (within the batch).
    fn get(reader: Self::Reader, row: usize) -> V;
}

/// The column `name` of `batch` as an `A`.
fn column_as<'a, A: Array + 'static>(
    batch: &'a RecordBatch,
    name: &str,
    expected: &str,
) -> Result<&'a A, ArrowError> {
    let column = batch
        .column_by_name(name)
        .ok_or_else(|| ArrowError::SchemaError(format!("the batch has no column {name}")))?;
    column.as_any().downcast_ref::<A>().ok_or_else(|| {
        ArrowError::SchemaError(format!(
            "column {name} is {}, not {expected}",
            column.data_type()
        ))
    })
}

/// A string column read back, in any of Arrow's string layouts (a query engine may hand back
/// views where the files hold plain strings).
#[derive(Debug, Clone, Copy)]
pub enum Texts<'a> {
    /// `Utf8`.
    Plain(&'a StringArray),
    /// `LargeUtf8`.
    Large(&'a LargeStringArray),
    /// `Utf8View`.
    View(&'a StringViewArray),
}

impl<'a> Texts<'a> {
    /// Column `name` of `batch`.
    pub fn of(batch: &'a RecordBatch, name: &str) -> Result<Self, ArrowError> {
        let column = batch
            .column_by_name(name)
            .ok_or_else(|| ArrowError::SchemaError(format!("the batch has no column {name}")))?;
        let any = column.as_any();
        if let Some(plain) = any.downcast_ref::<StringArray>() {
            Ok(Self::Plain(plain))
        } else if let Some(large) = any.downcast_ref::<LargeStringArray>() {
            Ok(Self::Large(large))
        } else if let Some(view) = any.downcast_ref::<StringViewArray>() {
            Ok(Self::View(view))
        } else {
            Err(ArrowError::SchemaError(format!(
                "column {name} is {}, not a string",
                column.data_type()
            )))
        }
    }

    /// Row `row`'s text; `None` when null.
    #[inline]
    pub fn get(self, row: usize) -> Option<&'a str> {
        match self {
            Self::Plain(array) => array.is_valid(row).then(|| array.value(row)),
            Self::Large(array) => array.is_valid(row).then(|| array.value(row)),
            Self::View(array) => array.is_valid(row).then(|| array.value(row)),
        }
    }
}

/// The `schema_version` column of a table's batch, read back; 0 (prost's default) where it is
/// absent or null.
pub fn versions<'a>(
    batch: &'a RecordBatch,
) -> Result<impl Fn(usize) -> u32 + Copy + 'a, ArrowError> {
    let column = match batch.column_by_name(crate::tables::column::SCHEMA_VERSION) {
        Some(_) => Some(column_as::<Int32Array>(
            batch,
            crate::tables::column::SCHEMA_VERSION,
            "Int32",
        )?),
        None => None,
    };
    Ok(move |row: usize| {
        column
            .filter(|column| column.is_valid(row))
            .map_or(0, |column| u32::try_from(column.value(row)).unwrap_or(0))
    })
}

/// A non-null string column.
pub struct Text(TextColumn);

/// A nullable string column.
pub struct OptText(TextColumn);

/// A UTC timestamp column in microseconds, from Unix nanoseconds.
pub struct Time(Vec<i64>);

/// A non-null signed 64-bit column, from an unsigned count.
pub struct Long(Vec<i64>);

/// A nullable signed 64-bit column, from an optional unsigned count.
pub struct OptLong(Int64Builder);

/// A nullable signed 32-bit column, from an optional `uint32`.
pub struct OptInt(Int32Builder);

/// A counter point's temporality, stored as `delta`, `cumulative` or `unspecified`.
pub struct TemporalityText(TextColumn);

/// Nanoseconds since the epoch to microseconds, as stored (sub-microsecond digits are cut).
pub fn micros(nanos: u64) -> i64 {
    // u64 nanoseconds / 1000 is below 2^54, which always fits in an i64.
    i64::try_from(nanos / 1000).unwrap_or(i64::MAX)
}

/// A count the rows' checks proved fits in an i64.
fn checked(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Texts given for `rows` rows, sized from the first: ids and most others are alike in length.
fn sized(rows: usize, first: Option<&[u8]>) -> TextColumn {
    let len = first.map_or(0, <[u8]>::len);
    TextColumn::with_capacity(rows, rows * len + 1024)
}

impl Build for Text {
    fn field(name: &str) -> Field {
        Field::new(name, DataType::Utf8, false)
    }

    fn finish(self) -> Result<ArrayRef, ArrowError> {
        self.0.finish()
    }
}

impl<T: AsRef<[u8]>> Column<T> for Text {
    fn with_capacity(rows: usize, first: Option<T>) -> Self {
        Self(sized(rows, first.as_ref().map(AsRef::as_ref)))
    }

    #[inline]
    fn push(&mut self, value: T) {
        self.0.append(value.as_ref());
    }
}

impl Build for OptText {
    fn field(name: &str) -> Field {
        Field::new(name, DataType::Utf8, true)
    }

    fn finish(self) -> Result<ArrayRef, ArrowError> {
        self.0.finish()
    }
}

impl<T: AsRef<[u8]>> Column<Option<T>> for OptText {
    fn with_capacity(rows: usize, first: Option<Option<T>>) -> Self {
        Self(sized(rows, first.flatten().as_ref().map(AsRef::as_ref)))
    }

    #[inline]
    fn push(&mut self, value: Option<T>) {
        self.0.append_option(value.as_ref().map(AsRef::as_ref));
    }
}

impl Build for Time {
    fn field(name: &str) -> Field {
        Field::new(
            name,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        )
    }

    fn finish(self) -> Result<ArrayRef, ArrowError> {
        Ok(timestamps(self.0))
    }
}

impl Column<u64> for Time {
    fn with_capacity(rows: usize, _: Option<u64>) -> Self {
        Self(Vec::with_capacity(rows))
    }

    #[inline]
    fn push(&mut self, nanos: u64) {
        self.0.push(micros(nanos));
    }
}

/// A UTC timestamp column of microseconds.
pub fn timestamps(micros: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(micros).with_timezone("UTC"))
}

impl Build for Long {
    fn field(name: &str) -> Field {
        Field::new(name, DataType::Int64, false)
    }

    fn finish(self) -> Result<ArrayRef, ArrowError> {
        Ok(Arc::new(Int64Array::from(self.0)))
    }
}

impl Column<u64> for Long {
    fn with_capacity(rows: usize, _: Option<u64>) -> Self {
        Self(Vec::with_capacity(rows))
    }

    #[inline]
    fn push(&mut self, value: u64) {
        self.0.push(checked(value));
    }
}

impl Column<u32> for Long {
    fn with_capacity(rows: usize, _: Option<u32>) -> Self {
        Self(Vec::with_capacity(rows))
    }

    #[inline]
    fn push(&mut self, value: u32) {
        self.0.push(i64::from(value));
    }
}

impl Build for OptLong {
    fn field(name: &str) -> Field {
        Field::new(name, DataType::Int64, true)
    }

    fn finish(mut self) -> Result<ArrayRef, ArrowError> {
        Ok(Arc::new(self.0.finish()))
    }
}

impl Column<Option<u64>> for OptLong {
    fn with_capacity(rows: usize, _: Option<Option<u64>>) -> Self {
        Self(Int64Builder::with_capacity(rows))
    }

    #[inline]
    fn push(&mut self, value: Option<u64>) {
        self.0.append_option(value.map(checked));
    }
}

impl Build for OptInt {
    fn field(name: &str) -> Field {
        Field::new(name, DataType::Int32, true)
    }

    fn finish(mut self) -> Result<ArrayRef, ArrowError> {
        Ok(Arc::new(self.0.finish()))
    }
}

impl Column<Option<u32>> for OptInt {
    fn with_capacity(rows: usize, _: Option<Option<u32>>) -> Self {
        Self(Int32Builder::with_capacity(rows))
    }

    #[inline]
    fn push(&mut self, value: Option<u32>) {
        // The rows' checks refuse a value past i32.
        self.0
            .append_option(value.map(|value| i32::try_from(value).unwrap_or(i32::MAX)));
    }
}

impl Build for TemporalityText {
    fn field(name: &str) -> Field {
        Field::new(name, DataType::Utf8, false)
    }

    fn finish(self) -> Result<ArrayRef, ArrowError> {
        self.0.finish()
    }
}

impl Column<i32> for TemporalityText {
    fn with_capacity(rows: usize, _: Option<i32>) -> Self {
        Self(TextColumn::with_capacity(rows, rows * 5))
    }

    #[inline]
    fn push(&mut self, value: i32) {
        let text = match Temporality::try_from(value) {
            Ok(Temporality::Delta) => "delta",
            Ok(Temporality::Cumulative) => "cumulative",
            _ => "unspecified",
        };
        self.0.append(text.as_bytes());
    }
}

impl<'a> Read<'a, &'a str> for Text {
    type Reader = Texts<'a>;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        Texts::of(batch, name)
    }
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> &'a str {
        reader.get(row).unwrap_or_default()
    }
}

impl<'a> Read<'a, Option<&'a str>> for OptText {
    type Reader = Texts<'a>;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        Texts::of(batch, name)
    }
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> Option<&'a str> {
        reader.get(row)
    }
}

impl<'a> Read<'a, u64> for Time {
    type Reader = &'a TimestampMicrosecondArray;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        column_as(batch, name, "a timestamp in microseconds")
    }
    /// Back to nanoseconds: the three digits the column cut are zero.
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> u64 {
        u64::try_from(reader.value(row))
            .unwrap_or(0)
            .saturating_mul(1000)
    }
}

impl<'a> Read<'a, u64> for Long {
    type Reader = &'a Int64Array;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        column_as(batch, name, "Int64")
    }
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> u64 {
        u64::try_from(reader.value(row)).unwrap_or(0)
    }
}

impl<'a> Read<'a, u32> for Long {
    type Reader = &'a Int64Array;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        column_as(batch, name, "Int64")
    }
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> u32 {
        u32::try_from(reader.value(row)).unwrap_or(u32::MAX)
    }
}

impl<'a> Read<'a, Option<u64>> for OptLong {
    type Reader = &'a Int64Array;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        column_as(batch, name, "Int64")
    }
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> Option<u64> {
        reader
            .is_valid(row)
            .then(|| u64::try_from(reader.value(row)).unwrap_or(0))
    }
}

impl<'a> Read<'a, Option<u32>> for OptInt {
    type Reader = &'a Int32Array;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        column_as(batch, name, "Int32")
    }
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> Option<u32> {
        reader
            .is_valid(row)
            .then(|| u32::try_from(reader.value(row)).unwrap_or(0))
    }
}

impl<'a> Read<'a, i32> for TemporalityText {
    type Reader = Texts<'a>;
    fn reader(batch: &'a RecordBatch, name: &str) -> Result<Self::Reader, ArrowError> {
        Texts::of(batch, name)
    }
    #[inline]
    fn get(reader: Self::Reader, row: usize) -> i32 {
        match reader.get(row) {
            Some("delta") => Temporality::Delta as i32,
            Some("cumulative") => Temporality::Cumulative as i32,
            _ => Temporality::Unspecified as i32,
        }
    }
}

/// A string column built from texts given as bytes, checked as UTF-8 once, as a whole, when it
/// is finished.
struct TextColumn {
    offsets: Vec<i32>,
    values: Vec<u8>,
    nulls: NullBufferBuilder,
    /// Set when the values passed what an `i32` offset reaches; `finish` then refuses.
    overflow: bool,
}

impl TextColumn {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Self {
            offsets,
            values: Vec::with_capacity(bytes),
            nulls: NullBufferBuilder::new(rows),
            overflow: false,
        }
    }

    #[inline]
    fn append(&mut self, text: &[u8]) {
        self.values.extend_from_slice(text);
        self.end_value();
        self.nulls.append_non_null();
    }

    #[inline]
    fn append_option(&mut self, text: Option<&[u8]>) {
        match text {
            Some(text) => self.append(text),
            None => {
                self.end_value();
                self.nulls.append_null();
            }
        }
    }

    #[inline]
    fn end_value(&mut self) {
        let end = i32::try_from(self.values.len()).unwrap_or_else(|_| {
            self.overflow = true;
            i32::MAX
        });
        self.offsets.push(end);
    }

    fn finish(mut self) -> Result<ArrayRef, ArrowError> {
        if self.overflow {
            return Err(ArrowError::OffsetOverflowError(self.values.len()));
        }
        // Offsets start at 0 and never fall: `OffsetBuffer::new` would panic otherwise.
        let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
        // `try_new` checks that the values are UTF-8 and that every offset falls between
        // characters.
        let array =
            StringArray::try_new(offsets, Buffer::from_vec(self.values), self.nulls.finish())?;
        Ok(Arc::new(array))
    }
}
