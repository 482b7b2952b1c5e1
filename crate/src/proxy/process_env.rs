//! What `palaver serve` and its children inherit from the process: TLS installed once, `PATH`
//! with absolute entries only, secrets kept from children. A leaf: used by the tools, the MCP
//! connections and the entry points, using none of them.

/// TLS for outgoing HTTPS (fetch_url, MCP servers over HTTPS) through rustls with ring: installed
/// once per process, before the first client is built (an embedder of the library gets it too).
pub fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// `PATH` with only its absolute entries (SECURITY F1): a relative entry (`.`, an empty one,
/// `node_modules/.bin`) would find programs in whatever folder a child runs in — a workspace's.
pub fn absolute_path_var() -> Option<std::ffi::OsString> {
    let path = std::env::var_os("PATH")?;
    std::env::join_paths(std::env::split_paths(&path).filter(|dir| dir.is_absolute())).ok()
}

/// Whether an environment variable looks like a secret (provider keys, tokens, passwords).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"]
        .iter()
        .any(|word| upper.contains(word))
}

/// Keeps secrets of the server's environment from its children (E11). `run_command` children get
/// a scrubbed environment, but could read `/proc/<server>/environ`, which shows the environment
/// block the process started with, whatever `remove_var` did since. So the values of
/// secret-looking variables are overwritten in that block, the variables removed, and the process
/// made non-dumpable (its `/proc` files then need root). Nothing in the server reads them.
pub(super) fn protect_environment() {
    extern "C" {
        static environ: *const *mut libc::c_char;
    }
    let mut secrets = Vec::new();
    // SAFETY: at start-up, before any other thread exists, this walks the process's own
    // environment array (NUL-terminated C strings, ended by a null pointer) and overwrites bytes
    // inside those strings only, never past their terminating NUL.
    unsafe {
        let mut cursor = environ;
        while !cursor.is_null() && !(*cursor).is_null() {
            let entry = *cursor;
            let bytes = std::ffi::CStr::from_ptr(entry).to_bytes();
            if let Some(eq) = bytes.iter().position(|b| *b == b'=') {
                let name = String::from_utf8_lossy(&bytes[..eq]).into_owned();
                if is_secret_name(&name) {
                    std::ptr::write_bytes(entry.add(eq + 1), 0, bytes.len() - eq - 1);
                    secrets.push(name);
                }
            }
            cursor = cursor.add(1);
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    for name in secrets {
        std::env::remove_var(name);
    }
}
