//! Shared test support: the embedded fixture tables, JSON subset matching, the harness.

pub mod harness;
pub mod json;
pub mod oracle;

mod tables {
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}

pub use tables::{FIXTURES, WIRE};

/// Fixture files under `tests/fixtures/<dir>/`, as (name, text).
pub fn fixtures_in(dir: &str) -> Vec<(&'static str, &'static str)> {
    let prefix = format!("{dir}/");
    FIXTURES
        .iter()
        .filter(|(path, _)| path.starts_with(&prefix))
        .map(|(path, text)| (*path, *text))
        .collect()
}

pub fn fixture(path: &str) -> Option<&'static str> {
    FIXTURES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
}

pub fn wire(path: &str) -> Option<&'static str> {
    WIRE.iter().find(|(p, _)| *p == path).map(|(_, text)| *text)
}
