//! Compact JSON text, byte for byte what `serde_json::to_string` writes, with strings escaped a
//! word at a time. serde_json's escaping looks at one byte per step through calls that the
//! size-optimized wasm does not inline (`split_at`, `split_first`): it was a quarter to a third
//! of handing a long message to the page (issue 20). Numbers are written by serde_json itself;
//! `RawValue` is written as it is (serde_json marks it with a private struct name).

use serde::ser::{self, Impossible, Serialize, Serializer};

mod compound;

use compound::Compound;

type Error = serde_json::Error;

/// `value` as compact JSON text, equal to `serde_json::to_string(value)`.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    write(value, false).map(|(text, _)| text)
}

/// `value` as compact JSON text in pure ASCII: every character outside ASCII written as a
/// `\uXXXX` escape (a surrogate pair above U+FFFF), the same JSON value; with how many bytes of
/// UTF-8 those characters were. Why: a browser decodes an ASCII text from wasm memory on a fast
/// path and `JSON.parse` reads it as a one-byte string; a single other character sends the whole
/// text down the slow path, twice the time for a long message (issue 20).
pub fn to_ascii_string<T: Serialize + ?Sized>(value: &T) -> Result<(String, usize), Error> {
    write(value, true)
}

fn write<T: Serialize + ?Sized>(value: &T, ascii: bool) -> Result<(String, usize), Error> {
    let mut writer = Writer::new(ascii, None);
    value.serialize(&mut writer)?;
    // Only whole UTF-8 strings, ASCII escapes and serde_json's own output were written.
    let text = String::from_utf8(writer.out).map_err(ser::Error::custom)?;
    Ok((text, writer.escaped_bytes))
}

/// What takes the text `write_in_pieces` writes, a piece at a time.
pub type Sink = Box<dyn FnMut(&str)>;

/// `value` written as `to_string` (or, `ascii`, as `to_ascii_string`) writes it, handed to `sink`
/// in pieces of about `piece` bytes, each cut between two elements of an array; returns how many
/// bytes were escaped (as `to_ascii_string` does). Why: a long chat's text is never whole in
/// the wasm memory, which never shrinks — a 5 MB snapshot grown by doubling had an 8 MB buffer
/// and the 4 MB one it came from alive at once (issue 41).
pub fn write_in_pieces<T: Serialize + ?Sized>(
    value: &T,
    ascii: bool,
    piece: usize,
    sink: Sink,
) -> Result<usize, Error> {
    let mut writer = Writer::new(ascii, Some((sink, piece)));
    value.serialize(&mut writer)?;
    writer.hand_over()?;
    Ok(writer.escaped_bytes)
}

/// serde_json's name for the struct a `RawValue` serializes as.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

struct Writer {
    out: Vec<u8>,
    /// Characters outside ASCII are written as `\u` escapes.
    ascii: bool,
    /// How many bytes of UTF-8 were written as `\u` escapes.
    escaped_bytes: usize,
    /// Where the text goes once `out` holds a piece's worth (`write_in_pieces`).
    sink: Option<(Sink, usize)>,
}

impl Writer {
    fn new(ascii: bool, sink: Option<(Sink, usize)>) -> Self {
        Writer {
            out: Vec::new(),
            ascii,
            escaped_bytes: 0,
            sink,
        }
    }

    /// Between two elements of an array: a piece's worth goes to the sink.
    fn element_written(&mut self) -> Result<(), Error> {
        match &self.sink {
            Some((_, piece)) if self.out.len() >= *piece => self.hand_over(),
            _ => Ok(()),
        }
    }

    /// What is written so far, to the sink; whole values only, so whole UTF-8 characters.
    fn hand_over(&mut self) -> Result<(), Error> {
        if let Some((sink, _)) = &mut self.sink {
            sink(std::str::from_utf8(&self.out).map_err(ser::Error::custom)?);
            self.out.clear();
        }
        Ok(())
    }

    fn string(&mut self, text: &str) {
        self.out.push(b'"');
        self.escaped(text);
        self.out.push(b'"');
    }

    /// A string's contents, escaped as serde_json escapes them (and outside ASCII in ASCII mode).
    fn escaped(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut start = 0;
        loop {
            let at = next_special(bytes, start, self.ascii);
            self.out.extend_from_slice(&bytes[start..at]);
            let Some(&byte) = bytes.get(at) else { return };
            start = at + 1;
            match byte {
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\\' => self.out.extend_from_slice(b"\\\\"),
                b'\n' => self.out.extend_from_slice(b"\\n"),
                b'\r' => self.out.extend_from_slice(b"\\r"),
                b'\t' => self.out.extend_from_slice(b"\\t"),
                0x08 => self.out.extend_from_slice(b"\\b"),
                0x0c => self.out.extend_from_slice(b"\\f"),
                0x80.. => start = at + self.unicode_escape(text.get(at..).unwrap_or_default()),
                _ => self.hex_escape(u16::from(byte)),
            }
        }
    }

    /// The text of a `RawValue` as it is; in ASCII mode with its characters outside ASCII
    /// escaped (they can only be inside its strings).
    fn raw(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut start = 0;
        while self.ascii {
            let Some(at) = next_non_ascii(bytes, start) else {
                break;
            };
            self.out.extend_from_slice(&bytes[start..at]);
            start = at + self.unicode_escape(text.get(at..).unwrap_or_default());
        }
        self.out
            .extend_from_slice(bytes.get(start..).unwrap_or_default());
    }

    /// The first character of `rest` as `\u` escapes; its length in bytes (at least 1).
    fn unicode_escape(&mut self, rest: &str) -> usize {
        let c = rest.chars().next().unwrap_or(char::REPLACEMENT_CHARACTER);
        let mut units = [0u16; 2];
        for &unit in c.encode_utf16(&mut units).iter() {
            self.hex_escape(unit);
        }
        self.escaped_bytes += c.len_utf8();
        c.len_utf8()
    }

    fn hex_escape(&mut self, unit: u16) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.out.extend_from_slice(b"\\u");
        for shift in [12, 8, 4, 0] {
            self.out.push(HEX[usize::from((unit >> shift) & 0xf)]);
        }
    }

    /// A number as serde_json writes it (the same digits, `null` for a float that is not finite).
    fn number<T: Serialize>(&mut self, value: T) -> Result<(), Error> {
        serde_json::to_writer(&mut self.out, &value)
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the 8 bytes of `word` must be escaped: a control byte, `"` or `\`.
/// Inlined by force: the size-optimized wasm otherwise calls it once per word.
#[inline(always)]
fn word_needs_escape(word: u64) -> bool {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x;
    (below_space | zero_in(quote) | zero_in(backslash)) & HIGHS != 0
}

fn byte_needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// The index of the first byte at or after `from` that must be escaped, or `bytes.len()`.
/// Also the end of a JSON string's plain run when reading one (`provider::literal`).
pub fn next_escape(bytes: &[u8], from: usize) -> usize {
    next_special(bytes, from, false)
}

/// The first byte to escape, a byte outside ASCII counting as one when `ascii`.
fn next_special(bytes: &[u8], from: usize, ascii: bool) -> usize {
    let highs = if ascii { HIGHS } else { 0 };
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        if word_needs_escape(word) || word & highs != 0 {
            break;
        }
        at += 8;
    }
    let rest = bytes.get(at..).unwrap_or_default();
    at + rest
        .iter()
        .position(|&b| byte_needs_escape(b) || (ascii && b >= 0x80))
        .unwrap_or(rest.len())
}

/// The index of the first byte at or after `from` that is not ASCII.
fn next_non_ascii(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        if word & HIGHS != 0 {
            break;
        }
        at += 8;
    }
    bytes[at..].iter().position(|&b| b >= 0x80).map(|i| at + i)
}

impl<'a> Serializer for &'a mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.string(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.string(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for byte in v {
            seq.serialize_element(byte)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_unit()
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
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        self.string(variant);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, Error> {
        Ok(Compound::open(self, b"[", b"]"))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        self.out.push(b'{');
        self.string(variant);
        self.out.push(b':');
        Ok(Compound::open(self, b"[", b"]}"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, Error> {
        Ok(Compound::open(self, b"{", b"}"))
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Compound<'a>, Error> {
        if name == RAW_VALUE_TOKEN {
            return Ok(Compound {
                writer: self,
                first: true,
                close: b"",
                raw: true,
            });
        }
        Ok(Compound::open(self, b"{", b"}"))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        self.out.push(b'{');
        self.string(variant);
        self.out.push(b':');
        Ok(Compound::open(self, b"{", b"}}"))
    }
}
