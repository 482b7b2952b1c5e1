//! Embeds the test fixtures at compile time so the same test binary runs under `cargo test` and
//! in headless Chromium (GUIDE §7): `tests/fixtures/**` of this repository and the provider
//! transcripts of `../shared/wire/**`. Writes `$OUT_DIR/fixtures.rs` with one table of
//! `(relative path, contents)`; a missing `shared/` gives an empty wire table, which the wire
//! tests report as a failure rather than passing on nothing.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let repo = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
    let fixtures = repo.join("tests").join("fixtures");
    let wire = repo
        .parent()
        .map(|p| p.join("shared").join("wire"))
        .unwrap_or_default();
    let mut out = String::new();
    out.push_str(&table("FIXTURES", &fixtures));
    out.push_str(&table("WIRE", &wire));
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("fixtures.rs");
    if let Err(e) = fs::write(&dest, out) {
        panic!("cannot write {}: {e}", dest.display());
    }
    println!("cargo:rerun-if-changed={}", fixtures.display());
    println!("cargo:rerun-if-changed={}", wire.display());
    println!("cargo:rerun-if-changed=build.rs");
}

fn table(name: &str, root: &Path) -> String {
    let mut files = Vec::new();
    collect(root, root, &mut files);
    files.sort();
    let mut out = format!("pub static {name}: &[(&str, &str)] = &[\n");
    for (relative, absolute) in files {
        println!("cargo:rerun-if-changed={}", absolute.display());
        out.push_str(&format!(
            "    ({relative:?}, include_str!({:?})),\n",
            absolute.display().to_string()
        ));
    }
    out.push_str("];\n");
    out
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, files);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("json" | "sse")
        ) {
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            files.push((relative, path));
        }
    }
}
