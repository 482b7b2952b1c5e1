//! The vault secret (SECURITY F7). The page remembers API keys and the sync password encrypted in
//! IndexedDB under a non-extractable key of the browser's. Any page served at the app's origin can
//! use that key — and when `palaver serve` is stopped, any process may serve that origin
//! (`127.0.0.1:8787`: a project's dev server, an escaped child). So the app `palaver serve` serves
//! locks remembered secrets a second time with a key only `palaver serve` holds: 32 random bytes
//! in the user's config folder (`palaver/vault-secret`, 0600 in a 0700 folder), handed to the page
//! behind the token (`GET /api/vault`). Without `palaver serve` running, nothing decrypts.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub struct VaultSecret {
    bytes: [u8; 32],
}

/// Never its bytes.
impl std::fmt::Debug for VaultSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VaultSecret(…)")
    }
}

impl VaultSecret {
    /// The secret in `folder/vault-secret`, made (with the folder) when missing. A file others
    /// may read, or one that is not 32 bytes, is refused.
    pub fn load_or_create(folder: &Path) -> Result<VaultSecret, String> {
        let path = folder.join("vault-secret");
        match std::fs::symlink_metadata(&path) {
            Ok(meta) => read(&path, &meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(folder, &path),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// The secret as the page takes it: base64.
    pub fn encoded(&self) -> String {
        base64(&self.bytes)
    }
}

/// `$XDG_CONFIG_HOME/palaver`, else `~/.config/palaver`.
pub fn default_folder() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .map(|dir| dir.join("palaver"))
}

fn read(path: &Path, meta: &std::fs::Metadata) -> Result<VaultSecret, String> {
    if !meta.file_type().is_file() || meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} must be a regular file only its owner can read (chmod 600)",
            path.display()
        ));
    }
    let mut bytes = [0u8; 32];
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.read_exact(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(VaultSecret { bytes })
}

fn create(folder: &Path, path: &Path) -> Result<VaultSecret, String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
        .map_err(|e| format!("{}: {e}", folder.display()))?;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(VaultSecret { bytes })
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_rfc() {
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(super::base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(super::base64(b"foob"), "Zm9vYg==");
    }
}
