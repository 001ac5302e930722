//! How a record is declared: the `record!` macro turns one declaration of a
//! Kafka record into everything that reads or writes it.
//!
//! From one list of fields (protobuf tag, name, protobuf type, and for a record that is also a
//! table row the column it fills), the macro writes:
//! - the owned record, a `prost::Message` (what `proto/candor/v1/records.proto` describes), with
//!   its JSON form for people reading a topic;
//! - its declaration as data ([`Declaration`]), from which the `.proto` file is rendered
//!   ([`crate::proto::render_proto`]) and checked equal to the committed one;
//! - for a row record, a borrowed view of its fields (texts as `&str` or as bytes), read straight
//!   from the wire without copying a text ([`wire::Reader`]), written back byte for byte as prost
//!   writes the owned record ([`wire::Writer`]), and converted to and from the owned record;
//! - for a row record, with feature `rows`: its table's Arrow fields, a builder of its columns
//!   and a reader of them ([`columns`]).
//!
//! Adding a field to a record is one line of its declaration; the places that use the field
//! then say what they do with it.

pub mod wire;

#[cfg(feature = "rows")]
pub mod columns;

/// A record as declared, for rendering it as protobuf source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declaration {
    /// The message name.
    pub name: &'static str,
    /// Its documentation, a line per entry.
    pub doc: &'static [&'static str],
    /// Its fields in tag order, `schema_version` first.
    pub fields: &'static [FieldDeclaration],
}

/// One field of a [`Declaration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDeclaration {
    /// The protobuf tag.
    pub tag: u32,
    /// The field name.
    pub name: &'static str,
    /// The protobuf type: a scalar type or an enum's name.
    pub proto_type: &'static str,
    /// Whether the field is `optional` (present or absent, rather than a default).
    pub optional: bool,
    /// Its documentation, a line per entry.
    pub doc: &'static [&'static str],
    /// How credentials are removed from the field before it is recorded; `None` for a field
    /// that holds no free-form text.
    pub redaction: Option<Redaction>,
}

/// How credentials are removed from a free-form text field before it is recorded, declared on
/// the field with `#[redact(Url)]` or `#[redact(Text)]` in its `record!` declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redaction {
    /// The value is a URL more often than not: its user information and secret-looking query
    /// parameters go, as `candor_schema::redact::redact_url` removes them.
    Url,
    /// The value is free text: secret-looking runs go, as `candor_schema::redact::redact_text`
    /// removes them.
    Text,
}

/// Serialises a field of a record for its JSON form: bytes as text (invalid UTF-8 replaced),
/// everything else as itself.
pub struct Json<'a, T>(pub &'a T);

macro_rules! json_as_itself {
    ($($type:ty),*) => {$(
        impl serde::Serialize for Json<'_, $type> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(self.0, serializer)
            }
        }
    )*};
}

json_as_itself!(
    u32,
    u64,
    i32,
    bool,
    String,
    Option<u32>,
    Option<u64>,
    Option<String>
);

impl serde::Serialize for Json<'_, Vec<u8>> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&String::from_utf8_lossy(self.0))
    }
}

/// The protobuf types a field may have, as Rust types, so that [`Kind`] can name a field's
/// owned and borrowed types: `(kind::uint64,)` or `(kind::uint64, kind::optional)`.
#[allow(non_camel_case_types)]
pub mod kind {
    /// `uint32`.
    pub struct uint32;
    /// `uint64`.
    pub struct uint64;
    /// `fixed64`.
    pub struct fixed64;
    /// `int32` (an enum's values are declared as `int32`, which has the same encoding).
    pub struct int32;
    /// `bool`.
    pub struct bool;
    /// `string`.
    pub struct string;
    /// `bytes`.
    pub struct bytes;
    /// An `optional` field: present or absent, rather than a default.
    pub struct optional;
}

/// The Rust types of a field of protobuf type `Self`.
pub trait Kind {
    /// In the owned record.
    type Owned;
    /// In a borrowed view whose texts are `T`.
    type View<T>;
}

macro_rules! kinds {
    ($($kind:ty => $owned:ty, $view:ty;)*) => {$(
        impl Kind for $kind {
            type Owned = $owned;
            type View<T> = $view;
        }
    )*};
}

kinds! {
    (kind::uint32,) => u32, u32;
    (kind::uint64,) => u64, u64;
    (kind::fixed64,) => u64, u64;
    (kind::int32,) => i32, i32;
    (kind::bool,) => bool, bool;
    (kind::string,) => String, T;
    (kind::bytes,) => Vec<u8>, Vec<u8>;
    (kind::uint32, kind::optional) => Option<u32>, Option<u32>;
    (kind::uint64, kind::optional) => Option<u64>, Option<u64>;
    (kind::string, kind::optional) => Option<String>, Option<T>;
}

/// The protobuf wire type of a field, for a match pattern.
macro_rules! wire_type {
    (fixed64) => {
        1
    };
    (string) => {
        2
    };
    (bytes) => {
        2
    };
    ($varint:ident) => {
        0
    };
}

/// Reads a field's value from a [`wire::Reader`], as prost reads it; `?` on a malformed one.
macro_rules! read {
    ($reader:ident; $kind:ident optional) => {
        Some($crate::record::read!($reader; $kind))
    };
    ($reader:ident; uint32) => {
        $reader.uint32()?
    };
    ($reader:ident; uint64) => {
        $reader.varint()?
    };
    ($reader:ident; int32) => {
        $reader.int32()?
    };
    ($reader:ident; bool) => {
        $reader.varint()? != 0
    };
    ($reader:ident; fixed64) => {
        $reader.fixed64()?
    };
    ($reader:ident; string) => {
        $reader.text()?
    };
}

/// Writes a field's value to a [`wire::Writer`] as prost writes it.
macro_rules! put {
    ($out:ident, $tag:tt, $value:expr; string) => {
        $out.text($tag, &$value)
    };
    ($out:ident, $tag:tt, $value:expr; string optional) => {
        $out.optional_text($tag, $value.as_ref())
    };
    ($out:ident, $tag:tt, $value:expr; fixed64) => {
        $out.fixed64($tag, $value)
    };
    ($out:ident, $tag:tt, $value:expr; int32) => {
        $out.int32($tag, $value)
    };
    ($out:ident, $tag:tt, $value:expr; bool) => {
        $out.varint($tag, u64::from($value))
    };
    ($out:ident, $tag:tt, $value:expr; $kind:ident optional) => {
        $out.optional_varint($tag, $value.map(u64::from))
    };
    ($out:ident, $tag:tt, $value:expr; $kind:ident) => {
        $out.varint($tag, u64::from($value))
    };
}

/// The bytes a field takes in a record's encoding, as [`put!`] writes it.
macro_rules! encoded_len {
    ($tag:tt, $value:expr; string) => {
        $crate::record::wire::text_len($tag, $crate::record::wire::WireText::wire_len(&$value))
    };
    ($tag:tt, $value:expr; string optional) => {
        $value.as_ref().map_or(0, |text| {
            $crate::record::wire::optional_text_len(
                $tag,
                $crate::record::wire::WireText::wire_len(text),
            )
        })
    };
    ($tag:tt, $value:expr; fixed64) => {
        $crate::record::wire::fixed64_len($tag, $value)
    };
    ($tag:tt, $value:expr; int32) => {
        $crate::record::wire::varint_len($tag, i64::from($value) as u64)
    };
    ($tag:tt, $value:expr; $kind:ident optional) => {
        $value.map_or(0, |value| {
            $crate::record::wire::optional_varint_len($tag, u64::from(value))
        })
    };
    ($tag:tt, $value:expr; $kind:ident) => {
        $crate::record::wire::varint_len($tag, u64::from($value))
    };
}

/// A text field's value passed through `f` (the other fields as they are), for a view's
/// `map_texts`.
macro_rules! map_text {
    ($value:expr, $f:ident; string) => {
        $f($value)
    };
    ($value:expr, $f:ident; string optional) => {
        $value.map(&$f)
    };
    ($value:expr, $f:ident; $kind:ident $($optional:ident)?) => {
        $value
    };
}

/// Whether a field's value, with texts as bytes, is UTF-8 (true for the fields that are not
/// texts).
macro_rules! utf8 {
    ($value:expr; string) => {
        $crate::record::wire::is_utf8($value)
    };
    ($value:expr; string optional) => {
        $value.is_none_or($crate::record::wire::is_utf8)
    };
    ($value:expr; $kind:ident $($optional:ident)?) => {
        true
    };
}

/// A field of an owned record, borrowed for the view.
macro_rules! borrow {
    ($value:expr; string) => {
        $value.as_str()
    };
    ($value:expr; string optional) => {
        $value.as_deref()
    };
    ($value:expr; $kind:ident $($optional:ident)?) => {
        $value
    };
}

/// A field of a view, owned again for the record.
macro_rules! to_owned {
    ($value:expr; string) => {
        $value.into()
    };
    ($value:expr; string optional) => {
        $value.map(Into::into)
    };
    ($value:expr; $kind:ident $($optional:ident)?) => {
        $value
    };
}

/// A field's declared [`Redaction`], as an `Option`.
macro_rules! redaction {
    ($how:ident) => {
        Some($crate::record::Redaction::$how)
    };
    () => {
        None
    };
}

/// Passes a field declared `#[redact(..)]` to `f` with its [`Redaction`]: a text as it is, an
/// optional text when present. A field with no redaction is passed over.
macro_rules! visit_redacted {
    ($f:ident, $value:expr, []; $($kind:tt)*) => {};
    ($f:ident, $value:expr, [$how:ident]; string) => {
        $f($crate::record::Redaction::$how, &mut $value)
    };
    ($f:ident, $value:expr, [$how:ident]; string optional) => {
        if let Some(value) = $value.as_mut() {
            $f($crate::record::Redaction::$how, value)
        }
    };
}

/// Whether a field is declared `optional`.
macro_rules! is_optional {
    (optional) => {
        true
    };
    () => {
        false
    };
}

/// The protobuf type's name in the `.proto` source.
macro_rules! proto_type {
    ($kind:ident ($enum:ident)) => {
        stringify!($enum)
    };
    ($kind:ident) => {
        stringify!($kind)
    };
}

/// Declares one Kafka record; see the [module](self). Every record begins with
/// `schema_version: uint32 = 1`, which the macro adds.
///
/// ```text
/// record! {
///     /// What the record is.
///     row OutcomeCount, view OutcomeCountFields, columns OutcomeCountColumns {
///         /// What the field is.
///         point_id: string = 2 => POINT_ID as Text,
///         temporality: int32(Temporality) = 11 => TEMPORALITY as TemporalityText,
///         …
///     }
/// }
/// ```
///
/// A text field that may hold credentials says how they are removed before it is recorded,
/// with `#[redact(Url)]` or `#[redact(Text)]` after its documentation ([`Redaction`]); the
/// collector removes them from exactly the fields so declared.
///
/// A `row` record is also a row of a table: every field names its column (a constant of
/// [`crate::tables::column`]) and the column's builder ([`columns`]). A `message` record
/// (`message Rejected { reason: string = 2, … }`) has neither view nor columns.
macro_rules! record {
    (
        $(#[doc = $doc:literal])*
        message $name:ident {
            $(
                $(#[doc = $field_doc:literal])+
                $(#[redact($how:ident)])?
                $field:ident : $kind:ident $(($enum:ident))? $($optional:ident)? = $tag:tt
            ),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct $name {
            /// The version of the record's layout: [`RECORD_SCHEMA_VERSION`] when written by
            /// this build.
            #[prost(uint32, tag = 1)]
            pub schema_version: u32,
            $(
                $(#[doc = $field_doc])+
                #[prost($kind, $($optional,)? tag = $tag)]
                pub $field: <($crate::record::kind::$kind, $($crate::record::kind::$optional)?) as $crate::record::Kind>::Owned,
            )*
        }

        impl $name {
            /// The record as declared.
            pub const DECLARATION: $crate::record::Declaration = $crate::record::Declaration {
                name: stringify!($name),
                doc: &[$($doc),*],
                fields: &[
                    $crate::record::FieldDeclaration {
                        tag: 1,
                        name: "schema_version",
                        proto_type: "uint32",
                        optional: false,
                        doc: &[],
                        redaction: None,
                    },
                    $(
                        $crate::record::FieldDeclaration {
                            tag: $tag,
                            name: stringify!($field),
                            proto_type: $crate::record::proto_type!($kind $(($enum))?),
                            optional: $crate::record::is_optional!($($optional)?),
                            doc: &[$($field_doc),+],
                            redaction: $crate::record::redaction!($($how)?),
                        },
                    )*
                ],
            };

            /// Passes each text declared `#[redact(..)]` to `f` with how it is redacted (an
            /// optional one when present), in the order declared.
            #[allow(unused_mut, unused_variables, reason = "a record may declare no redacted field")]
            pub fn for_each_redacted(&mut self, mut f: impl FnMut($crate::record::Redaction, &mut String)) {
                $($crate::record::visit_redacted!(f, self.$field, [$($how)?]; $kind $($optional)?);)*
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeStruct as _;
                let fields = Self::DECLARATION.fields.len();
                let mut out = serializer.serialize_struct(stringify!($name), fields)?;
                out.serialize_field("schema_version", &self.schema_version)?;
                $(out.serialize_field(stringify!($field), &$crate::record::Json(&self.$field))?;)*
                out.end()
            }
        }
    };

    (
        $(#[doc = $doc:literal])*
        row $name:ident, view $view:ident, columns $columns:ident {
            $(
                $(#[doc = $field_doc:literal])+
                $(#[redact($how:ident)])?
                $field:ident : $kind:ident $(($enum:ident))? $($optional:ident)? = $tag:tt
                    => $column:ident as $column_kind:ident
            ),* $(,)?
        }
    ) => {
        $crate::record::record! {
            $(#[doc = $doc])*
            message $name {
                $(
                    $(#[doc = $field_doc])+
                    $(#[redact($how)])?
                    $field: $kind $(($enum))? $($optional)? = $tag
                ),*
            }
        }

        #[doc = concat!(
            "The fields of a [`", stringify!($name), "`] record, with its texts borrowed as `T` ",
            "(`&str`, or bytes for code that checks them as UTF-8 itself). An absent text is ",
            "empty, as prost decodes it."
        )]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $view<T> {
            /// The version of the record's layout.
            pub schema_version: u32,
            $(
                $(#[doc = $field_doc])+
                pub $field: <($crate::record::kind::$kind, $($crate::record::kind::$optional)?) as $crate::record::Kind>::View<T>,
            )*
        }

        impl<'a, T: $crate::record::wire::Text<'a>> $view<T> {
            /// Reads a record whose every field is a known one with its own wire type, and
            /// whose every text is a `T`; `None` for anything else, which prost then decodes or
            /// refuses. Where it answers, the answer is prost's: a field that occurs again
            /// replaces the earlier value, and a `uint32` keeps the low 32 bits of its varint.
            pub fn parse(bytes: &'a [u8]) -> Option<Self> {
                let mut view = Self::default();
                let mut reader = $crate::record::wire::Reader::new(bytes);
                while !reader.is_empty() {
                    let key = reader.varint()?;
                    match (key >> 3, key & 7) {
                        (1, 0) => view.schema_version = reader.uint32()?,
                        $(
                            ($tag, $crate::record::wire_type!($kind)) => {
                                view.$field = $crate::record::read!(reader; $kind $($optional)?)
                            }
                        )*
                        _ => return None,
                    }
                }
                Some(view)
            }
        }

        impl<T: $crate::record::wire::WireText> $view<T> {
            /// The record's protobuf, byte for byte what prost writes for the owned record,
            /// without first copying every text into a record of its own.
            pub fn encode(&self) -> Vec<u8> {
                let mut out = $crate::record::wire::Writer::with_capacity(self.encoded_len());
                out.varint(1, u64::from(self.schema_version));
                $($crate::record::put!(out, $tag, self.$field; $kind $($optional)?);)*
                out.into_bytes()
            }

            /// The length of [`Self::encode`]'s bytes, worked out without writing them.
            pub fn encoded_len(&self) -> usize {
                $crate::record::wire::varint_len(1, u64::from(self.schema_version))
                    $(+ $crate::record::encoded_len!($tag, self.$field; $kind $($optional)?))*
            }
        }

        impl<T> $view<T> {
            /// Passes each text declared `#[redact(..)]` to `f` with how it is redacted (an
            /// optional one when present), in the order declared.
            #[allow(unused_mut, unused_variables, reason = "a record may declare no redacted field")]
            pub fn for_each_redacted(&mut self, mut f: impl FnMut($crate::record::Redaction, &mut T)) {
                $($crate::record::visit_redacted!(f, self.$field, [$($how)?]; $kind $($optional)?);)*
            }

            /// The same fields with every text passed through `f`.
            pub fn map_texts<U>(self, f: impl Fn(T) -> U) -> $view<U> {
                $view {
                    schema_version: self.schema_version,
                    $($field: $crate::record::map_text!(self.$field, f; $kind $($optional)?),)*
                }
            }
        }

        impl<'a> $view<&'a [u8]> {
            /// Whether every text is UTF-8. Most are ASCII, which is checked a word at a time.
            pub fn texts_are_utf8(&self) -> bool {
                true $(&& $crate::record::utf8!(self.$field; $kind $($optional)?))*
            }
        }

        impl<'a> $view<&'a str> {
            /// The view of an owned record.
            pub fn of(record: &'a $name) -> Self {
                Self {
                    schema_version: record.schema_version,
                    $($field: $crate::record::borrow!(record.$field; $kind $($optional)?),)*
                }
            }

            /// The owned record.
            pub fn to_record(&self) -> $name {
                self.into_record()
            }
        }

        impl<T: Into<String>> $view<T> {
            /// The owned record, its texts made from the view's.
            pub fn into_record(self) -> $name {
                $name {
                    schema_version: self.schema_version,
                    $($field: $crate::record::to_owned!(self.$field; $kind $($optional)?),)*
                }
            }
        }

        #[cfg(feature = "rows")]
        #[doc = concat!(
            "The columns of a batch of [`", stringify!($name), "`] rows, built a row at a ",
            "time; `schema_version` and the Kafka columns are the caller's."
        )]
        pub struct $columns {
            $($field: $crate::record::columns::$column_kind,)*
        }

        #[cfg(feature = "rows")]
        impl $columns {
            /// The columns' Arrow fields, in order.
            pub fn fields() -> Vec<::arrow_schema::Field> {
                use $crate::record::columns::Build as _;
                vec![$($crate::record::columns::$column_kind::field($crate::tables::column::$column),)*]
            }

            /// Columns for `rows` rows, their texts sized from the first row's, when given.
            pub fn with_capacity<T: AsRef<[u8]> + Copy>(rows: usize, first: Option<&$view<T>>) -> Self {
                use $crate::record::columns::Column;
                Self {
                    $($field: <$crate::record::columns::$column_kind
                        as Column<<($crate::record::kind::$kind, $($crate::record::kind::$optional)?) as $crate::record::Kind>::View<T>>>
                        ::with_capacity(rows, first.map(|first| first.$field)),)*
                }
            }

            /// Appends a row.
            #[inline]
            pub fn push<T: AsRef<[u8]> + Copy>(&mut self, row: &$view<T>) {
                use $crate::record::columns::Column;
                $(Column::push(&mut self.$field, row.$field);)*
            }

            /// The finished columns, in the order of [`Self::fields`].
            pub fn finish(self) -> Result<Vec<::arrow_array::ArrayRef>, ::arrow_schema::ArrowError> {
                use $crate::record::columns::Build as _;
                Ok(vec![$(self.$field.finish()?,)*])
            }

            /// Reads a batch of the table back: the fields of row `i` as a view whose texts are
            /// borrowed from the batch, the inverse of [`Self::push`]. Columns are found by
            /// name, so the batch may hold them in any order and others beside; a time comes
            /// back in whole microseconds, as stored.
            pub fn reader<'a>(
                batch: &'a ::arrow_array::RecordBatch,
            ) -> Result<impl Fn(usize) -> $view<&'a str> + 'a, ::arrow_schema::ArrowError> {
                use $crate::record::columns::Read;
                let versions = $crate::record::columns::versions(batch)?;
                $(
                    let $field = <$crate::record::columns::$column_kind
                        as Read<'a, <($crate::record::kind::$kind, $($crate::record::kind::$optional)?) as $crate::record::Kind>::View<&'a str>>>
                        ::reader(batch, $crate::tables::column::$column)?;
                )*
                Ok(move |row: usize| $view {
                    schema_version: versions(row),
                    $($field: <$crate::record::columns::$column_kind
                        as Read<'a, <($crate::record::kind::$kind, $($crate::record::kind::$optional)?) as $crate::record::Kind>::View<&'a str>>>
                        ::get($field, row),)*
                })
            }
        }
    };
}

pub(crate) use {
    borrow, encoded_len, is_optional, map_text, proto_type, put, read, record, redaction, to_owned,
    utf8, visit_redacted, wire_type,
};
