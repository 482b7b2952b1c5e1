//! The pairing token of `palaver serve`: 256 bits from the OS RNG (SECURITY A.2: at least 128), hex-encoded;
//! or read from a private file.

use std::path::Path;

pub fn fresh() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("the OS random source failed: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub fn read(path: &Path) -> Result<String, String> {
    refuse_shared_file(path)?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let token = text.trim().to_string();
    if token.len() < 32 || !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!(
            "{}: a token is at least 32 printable characters (128 bits in hex)",
            path.display()
        ));
    }
    Ok(token)
}

/// A token file others can read is refused (A4): it must be private to the user (0600).
#[cfg(unix)]
fn refuse_shared_file(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} is readable by others (mode {:o}); chmod 600 it",
            path.display(),
            mode & 0o777
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_shared_file(_path: &Path) -> Result<(), String> {
    Ok(())
}
