//! Arrays, objects and variants written element by element or field by field, and map keys as
//! serde_json writes them (strings; numbers, booleans and chars as strings).

use super::*;

/// An array, an object or a variant's body being written; `raw` for a `RawValue`.
pub(super) struct Compound<'a> {
    pub(super) writer: &'a mut Writer,
    pub(super) first: bool,
    pub(super) close: &'static [u8],
    pub(super) raw: bool,
}

impl<'a> Compound<'a> {
    pub(super) fn open(writer: &'a mut Writer, open: &[u8], close: &'static [u8]) -> Self {
        writer.out.extend_from_slice(open);
        Compound {
            writer,
            first: true,
            close,
            raw: false,
        }
    }

    fn separate(&mut self) {
        if !self.first {
            self.writer.out.push(b',');
        }
        self.first = false;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.separate();
        value.serialize(&mut *self.writer)?;
        self.writer.element_written()
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        if self.raw {
            return value.serialize(RawText(&mut *self.writer));
        }
        self.separate();
        self.writer.string(key);
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }

    fn close(self) -> Result<(), Error> {
        self.writer.out.extend_from_slice(self.close);
        Ok(())
    }
}

/// The compounds written element by element (arrays, tuples, a tuple variant's array).
macro_rules! element_compound {
    ($($kind:ident :: $method:ident),*) => {$(
        impl ser::$kind for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

element_compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// The compounds written field by field (structs, a struct variant's object, a `RawValue`).
macro_rules! field_compound {
    ($($kind:ident),*) => {$(
        impl ser::$kind for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

field_compound!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.separate();
        key.serialize(MapKey(&mut *self.writer))?;
        self.writer.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

pub(super) fn float_key_not_finite() -> Error {
    ser::Error::custom("float key must be finite (got NaN or +/-inf)")
}

pub(super) fn key_must_be_a_string() -> Error {
    ser::Error::custom("key must be a string")
}

/// A map key as serde_json writes it: strings, and numbers, booleans and chars as strings.
pub(super) struct MapKey<'a>(&'a mut Writer);

impl MapKey<'_> {
    fn quoted<T: Serialize>(self, value: T) -> Result<(), Error> {
        self.0.out.push(b'"');
        self.0.number(value)?;
        self.0.out.push(b'"');
        Ok(())
    }
}

/// The methods of a `Serializer` that takes only some scalars: every compound, and
/// `Option`/unit shapes, are refused with `$error`.
macro_rules! refuse_compounds {
    ($error:expr) => {
        type SerializeSeq = Impossible<(), Error>;
        type SerializeTuple = Impossible<(), Error>;
        type SerializeTupleStruct = Impossible<(), Error>;
        type SerializeTupleVariant = Impossible<(), Error>;
        type SerializeMap = Impossible<(), Error>;
        type SerializeStruct = Impossible<(), Error>;
        type SerializeStructVariant = Impossible<(), Error>;

        fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
            Err($error)
        }
        fn serialize_none(self) -> Result<(), Error> {
            Err($error)
        }
        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Error> {
            Err($error)
        }
        fn serialize_unit(self) -> Result<(), Error> {
            Err($error)
        }
        fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
            Err($error)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<(), Error> {
            Err($error)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
            Err($error)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
            Err($error)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Error> {
            Err($error)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Error> {
            Err($error)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
            Err($error)
        }
        fn serialize_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStruct, Error> {
            Err($error)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Error> {
            Err($error)
        }
    };
}

/// Scalar methods, each handing its value to `self.$how` (which writes or refuses it).
macro_rules! scalars {
    ($how:ident; $($method:ident($ty:ty)),*) => {$(
        fn $method(self, v: $ty) -> Result<(), Error> {
            self.$how(v)
        }
    )*};
}

impl Serializer for MapKey<'_> {
    type Ok = ();
    type Error = Error;
    refuse_compounds!(key_must_be_a_string());
    scalars!(quoted; serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64),
        serialize_i128(i128), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_u128(u128));

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.0.string(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.0.string(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.0.string(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(float_key_not_finite());
        }
        self.quoted(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(float_key_not_finite());
        }
        self.quoted(v)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
}

/// The text of a `RawValue`, written as it is (serde_json hands it over as a string).
pub(super) struct RawText<'a>(&'a mut Writer);

impl RawText<'_> {
    fn refuse<T>(self, _: T) -> Result<(), Error> {
        Err(not_raw())
    }
}

impl Serializer for RawText<'_> {
    type Ok = ();
    type Error = Error;
    refuse_compounds!(not_raw());
    scalars!(refuse; serialize_bool(bool), serialize_i8(i8), serialize_i16(i16),
        serialize_i32(i32), serialize_i64(i64), serialize_u8(u8), serialize_u16(u16),
        serialize_u32(u32), serialize_u64(u64), serialize_f32(f32), serialize_f64(f64),
        serialize_char(char));

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.0.raw(v);
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Error> {
        Err(not_raw())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(not_raw())
    }
}

pub(super) fn not_raw() -> Error {
    ser::Error::custom("a raw JSON value is its text")
}
