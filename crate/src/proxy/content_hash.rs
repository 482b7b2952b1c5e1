//! The content hash of `palaver serve`: FNV-1a, 64 bits, as hex — the `if_match` token of file
//! writes and of the workspace copy of chats. A leaf: hashing knows nothing of files or tools.

/// A stable content hash (FNV-1a, 64 bits, hex) for `if_match` conflict checks (A69, A73).
pub fn content_hash(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a(FNV_OFFSET, bytes))
}

pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a continued over `bytes` from `hash`, so a file can be hashed chunk by chunk.
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
