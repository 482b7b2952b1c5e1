//! The page's boundary is documented whole (issue 36): every method of `Palaver` (the browser
//! host's `web/host/`) is named in README's JS API section, and every error name the browser host
//! throws is explained there. A method or error added without a word fails here.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README's section `## The JS API`, up to the next section.
fn js_api_section() -> String {
    let readme = fs::read_to_string(root().join("README.md")).unwrap_or_default();
    readme
        .split("## The JS API")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_default()
        .to_string()
}

fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        match (c, upper) {
            ('_', _) => upper = true,
            (c, true) => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}

/// The JavaScript names of the public methods in one of `web/host/`'s files: `js_name` when an
/// attribute above the method gives one, else the Rust name in camel case.
pub fn palaver_methods(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut names = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line
            .strip_prefix("    pub fn ")
            .or_else(|| line.strip_prefix("    pub async fn "))
        else {
            continue;
        };
        let rust = rest.split(['(', '<']).next().unwrap_or_default();
        // The method's own attributes and doc: the lines above it, up to the end of the last item.
        let start = lines[..i]
            .iter()
            .rposition(|l| {
                l.trim().is_empty()
                    || (l.trim().ends_with('}') && !l.trim_start().starts_with("///"))
            })
            .map_or(0, |p| p + 1);
        let given = lines[start..i]
            .iter()
            .filter_map(|l| l.split("js_name = ").nth(1))
            .filter_map(|r| r.split([',', ')']).next())
            .last();
        names.push(given.map_or_else(|| camel(rust), |n| n.trim().to_string()));
    }
    names
}

/// The error names thrown through the host's `error("Name", …)`.
fn error_names(dir: &Path, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            error_names(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).unwrap_or_default();
            for piece in text.split("error(\"").skip(1) {
                if let Some(name) = piece.split('"').next() {
                    if !out.iter().any(|n| n == name) {
                        out.push(name.to_string());
                    }
                }
            }
        }
    }
}

#[test]
fn the_readme_names_every_palaver_method_and_error() {
    let section = js_api_section();
    assert!(section.len() > 500, "README has no JS API section");
    let host = root().join("crate/src/web/host");
    let mut methods = Vec::new();
    for entry in fs::read_dir(&host).into_iter().flatten().flatten() {
        methods.extend(palaver_methods(
            &fs::read_to_string(entry.path()).unwrap_or_default(),
        ));
    }
    assert!(
        methods.len() > 30,
        "the host's methods were not found ({methods:?})"
    );
    let mut errors = Vec::new();
    error_names(&root().join("crate/src/web"), &mut errors);
    assert!(
        errors.len() > 5,
        "the host's errors were not found ({errors:?})"
    );
    let unnamed: Vec<&String> = methods
        .iter()
        .chain(&errors)
        .filter(|name| {
            !section.contains(&format!("`{name}`")) && !section.contains(&format!(".{name}("))
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "README's JS API section does not name: {unnamed:?}"
    );
}

#[test]
fn the_method_reader_takes_js_names_and_camel_cases_the_rest() {
    let text = "    #[wasm_bindgen(js_name = peekChat, unchecked_return_type = \"X\")]\n    pub fn peek_chat(&self) {}\n    pub async fn set_sync(&self) {}\n    fn private_one() {}\n";
    assert_eq!(palaver_methods(text), ["peekChat", "setSync"]);
}

/// The variant names of `pub enum {name}` in `file`, in snake case (serde's `rename_all`).
fn variants(file: &str, name: &str) -> Vec<String> {
    let text = fs::read_to_string(root().join("crate/src").join(file)).unwrap_or_default();
    let body = text
        .split(&format!("pub enum {name} {{"))
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .unwrap_or("");
    body.lines()
        .filter_map(|line| {
            let word = line.strip_prefix("    ")?;
            let first = word.chars().next()?;
            if !first.is_ascii_uppercase() {
                return None;
            }
            let ident: String = word.chars().take_while(|c| c.is_alphanumeric()).collect();
            let mut snake = String::new();
            for (i, c) in ident.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            Some(snake)
        })
        .collect()
}

/// The tags a TypeScript union in `web/mod.rs` declares: each `{tag}: "x"` of `type {name} =`.
fn typescript_tags(name: &str, tag: &str) -> Vec<String> {
    let text = fs::read_to_string(root().join("crate/src/web/mod.rs")).unwrap_or_default();
    let after = text
        .split(&format!("export type {name} ="))
        .nth(1)
        .unwrap_or("");
    let union = after.split("\nexport ").next().unwrap_or("");
    union
        .match_indices(&format!("{{ {tag}: \""))
        .filter_map(|(at, found)| {
            let rest = &union[at + found.len()..];
            rest.split('"').next().map(String::from)
        })
        .collect()
}

/// The TypeScript types of the boundary declare every input and effect the engine has, and no
/// other (issue 36: an effect added in Rust and missing in the types fails here).
#[test]
fn the_typescript_unions_match_the_rust_enums() {
    for (ts, tag, file, rust) in [
        ("Effect", "effect", "effect.rs", "Effect"),
        ("Input", "input", "engine/input.rs", "Input"),
    ] {
        let mut declared = typescript_tags(ts, tag);
        let mut actual = variants(file, rust);
        declared.sort();
        actual.sort();
        assert!(actual.len() >= 6, "{rust}: read only {actual:?}");
        assert_eq!(
            declared, actual,
            "the TypeScript `{ts}` against `{rust}` in {file}"
        );
    }
}
