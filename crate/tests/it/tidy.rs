//! Tidy tests (GUIDE §10): project rules a program can check.
//! - Core modules (everything in `crate/src` but `web/`, `proxy/`, `cli/`, `main.rs`) mention no
//!   wasm, web-sys or `target_arch`, and call no `unwrap`/`expect` outside tests.
//! - Every source module opens with a `//!` header.
//! - Every fixture file is used: session fixtures by the runner, wire overrides by a wire case.

use std::fs;
use std::path::{Path, PathBuf};

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_host(path: &Path) -> bool {
    let relative = path.strip_prefix(src_dir()).unwrap_or(path);
    let first = relative
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .unwrap_or_default();
    matches!(
        first.as_str(),
        "web" | "proxy" | "cli" | "main.rs" | "lib.rs"
    )
}

/// The file without its `#[cfg(test)]` tail and without comments.
fn code_of(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    body.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn core_modules_are_host_free_and_do_not_unwrap() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let core: Vec<_> = files.iter().filter(|p| !is_host(p)).collect();
    assert!(core.len() >= 15, "found only {} core modules", core.len());
    let mut problems = Vec::new();
    for path in core {
        let code = code_of(&fs::read_to_string(path).unwrap_or_default());
        for banned in [
            "wasm_bindgen",
            "wasm-bindgen",
            "web_sys",
            "web-sys",
            "js_sys",
            "target_arch",
            ".unwrap()",
            ".expect(",
            "panic!(",
            "unreachable!(",
        ] {
            if code.contains(banned) {
                problems.push(format!("{}: contains `{banned}`", path.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "core rule broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_tidy_check_would_catch_an_unwrap() {
    assert!(code_of("fn f() { x.unwrap() }").contains(".unwrap()"));
    assert!(!code_of("fn f() {} // x.unwrap()").contains(".unwrap()"));
    assert!(is_host(&src_dir().join("web").join("mod.rs")));
    assert!(!is_host(&src_dir().join("session").join("mod.rs")));
}

#[test]
fn every_module_has_a_header() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let missing: Vec<String> = files
        .iter()
        .filter(|p| {
            !fs::read_to_string(p)
                .unwrap_or_default()
                .trim_start()
                .starts_with("//!")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a //! header:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_wire_override_names_an_existing_case() {
    for (path, _) in crate::support::fixtures_in("wire") {
        let case = path.trim_start_matches("wire/").trim_end_matches(".json");
        assert!(
            crate::support::wire(&format!("{case}.sse")).is_some(),
            "{path} overrides a case that does not exist"
        );
    }
}
