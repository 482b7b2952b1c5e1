//! What an image costs a model, as each provider kind counts it, from the image's own size: read
//! from the first bytes of its data URL (PNG, JPEG, GIF or WebP headers), never trusted from a
//! field beside it. An image whose size cannot be read counts as SPEC §5's 1 000 tokens.

/// Whose rule an image is counted by (each provider kind counts its own way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ImageRule {
    /// OpenAI chat and Responses, high detail: 512-px tiles.
    OpenAi,
    /// Gemini: 768-px tiles of 258 tokens.
    Gemini,
    /// Anthropic's pixels / 750 — also the middle ground where the provider is not known.
    #[default]
    Anthropic,
}

/// Tokens for an image whose size is unknown (SPEC §5).
pub const UNKNOWN_IMAGE_TOKENS: u64 = 1000;

/// How many base64 characters are decoded to find the size (JPEG's SOF may follow EXIF data).
const HEADER_CHARS: usize = 96 * 1024;

/// The tokens `rule` counts for an image of `width`×`height` pixels.
pub fn image_tokens(rule: ImageRule, width: u32, height: u32) -> u64 {
    let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    match rule {
        // OpenAI (high detail): fit in 2048×2048, shortest side to 768, then 170 per 512-px tile + 85.
        ImageRule::OpenAi => {
            let fit = (2048.0 / w.max(h)).min(1.0);
            let (w, h) = (w * fit, h * fit);
            let short = (768.0 / w.min(h)).min(1.0);
            let (w, h) = (w * short, h * short);
            85 + 170 * ((w / 512.0).ceil() * (h / 512.0).ceil()) as u64
        }
        // Gemini: 258 for an image within 384×384, else 258 per 768-px tile.
        ImageRule::Gemini => {
            if w <= 384.0 && h <= 384.0 {
                258
            } else {
                258 * ((w / 768.0).ceil() * (h / 768.0).ceil()) as u64
            }
        }
        // Anthropic (and the default): long edge to 1568 and at most ~1.15 MP, then w·h / 750.
        ImageRule::Anthropic => {
            let fit = (1568.0 / w.max(h))
                .min((1_150_000.0 / (w * h)).sqrt())
                .min(1.0);
            ((w * fit) * (h * fit) / 750.0).ceil() as u64
        }
    }
}

/// The tokens of an image part (`{type: "image_url", image_url: {url}}`) by `rule`.
pub fn part_tokens(rule: ImageRule, part: &serde_json::Value) -> u64 {
    let url = part
        .get("image_url")
        .and_then(|i| i.get("url"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    match data_url_dimensions(url) {
        Some((w, h)) => image_tokens(rule, w, h),
        None => UNKNOWN_IMAGE_TOKENS,
    }
}

/// The pixel size of a `data:image/…;base64,` URL, from its header bytes.
pub fn data_url_dimensions(url: &str) -> Option<(u32, u32)> {
    let (head, data) = url.strip_prefix("data:")?.split_once(',')?;
    if !head.ends_with(";base64") {
        return None;
    }
    let prefix = &data.as_bytes()[..data.len().min(HEADER_CHARS) / 4 * 4];
    dimensions(&decode_base64(prefix)?)
}

/// The pixel size in an image file's first bytes (PNG, GIF, JPEG, WebP).
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let be16 = |at: usize| -> Option<u32> {
        Some(u32::from(u16::from_be_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    let le16 = |at: usize| -> Option<u32> {
        Some(u32::from(u16::from_le_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some((be32(16)?, be32(20)?));
    }
    if bytes.starts_with(b"GIF8") {
        return Some((le16(6)?, le16(8)?));
    }
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        return webp(bytes);
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        // JPEG: walk the segments to a start-of-frame marker (C0–CF but C4, C8, CC).
        let mut at = 2;
        while at + 9 < bytes.len() {
            if bytes[at] != 0xFF {
                return None;
            }
            let marker = bytes[at + 1];
            if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
                return Some((be16(at + 7)?, be16(at + 5)?));
            }
            at += 2 + be16(at + 2)? as usize;
        }
    }
    None
}

fn webp(bytes: &[u8]) -> Option<(u32, u32)> {
    let le24 = |at: usize| -> Option<u32> {
        let b = bytes.get(at..at + 3)?;
        Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
    };
    match bytes.get(12..16)? {
        b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
        b"VP8L" => {
            let b = bytes.get(21..25)?;
            let bits = u32::from_le_bytes(b.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8 " => {
            let w = u32::from(u16::from_le_bytes([*bytes.get(26)?, *bytes.get(27)?])) & 0x3FFF;
            let h = u32::from(u16::from_le_bytes([*bytes.get(28)?, *bytes.get(29)?])) & 0x3FFF;
            Some((w, h))
        }
        _ => None,
    }
}

/// Standard base64 (no line breaks); `None` at a character outside the alphabet.
fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        }))
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for chunk in text.chunks(4) {
        let pads = chunk.iter().rev().take_while(|c| **c == b'=').count();
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= if *c == b'=' { 0 } else { value(*c)? } << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pads.min(2)]);
    }
    Some(out)
}
