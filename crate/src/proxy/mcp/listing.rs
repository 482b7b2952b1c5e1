//! A server's tools, resources and prompts listed page by page within caps (SECURITY F5). A server
//! is another program: one whose `tools/list` pages for ever (a `nextCursor` on every page) grew
//! `palaver serve` by gigabytes. Listing stops at `Caps` — pages, items, bytes, time — keeps what
//! fit, and says why it stopped (the server's status shows it).

use serde_json::Value;
use std::future::Future;
use std::time::Duration;

/// How far one listing goes.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub pages: usize,
    pub items: usize,
    pub bytes: usize,
    pub time: Duration,
}

pub const CAPS: Caps = Caps {
    pages: 50,
    items: 2_000,
    bytes: 8 * 1024 * 1024,
    time: Duration::from_secs(30),
};

/// What a listing kept, and why it stopped early (`None`: the server listed everything).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Listed {
    pub items: Vec<Value>,
    pub cut: Option<String>,
}

/// One page: its items as JSON and the cursor of the next, or why it failed.
pub type Page = Result<(Vec<Value>, Option<String>), String>;

/// Lists `what` ("tools", "resources", "prompts") page by page through `page(cursor)`.
pub async fn list<F, Fut>(what: &str, caps: Caps, mut page: F) -> Listed
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Page>,
{
    let deadline = tokio::time::Instant::now() + caps.time;
    let mut listed = Listed::default();
    let mut bytes = 0usize;
    let mut cursor = None;
    for pages in 0.. {
        if pages == caps.pages {
            listed.cut = Some(format!(
                "it listed {what} over more than {} pages; the first {} {what} are used",
                caps.pages,
                listed.items.len()
            ));
            break;
        }
        let (items, next) = match tokio::time::timeout_at(deadline, page(cursor)).await {
            Ok(Ok(page)) => page,
            Ok(Err(error)) if pages == 0 => {
                listed.cut = Some(format!("listing its {what} failed: {error}"));
                break;
            }
            Ok(Err(error)) => {
                listed.cut = Some(format!(
                    "listing its {what} failed after {pages} pages ({error}); the {} listed are used",
                    listed.items.len()
                ));
                break;
            }
            Err(_) => {
                listed.cut = Some(format!(
                    "it took over {} s to list its {what}; the {} listed are used",
                    caps.time.as_secs(),
                    listed.items.len()
                ));
                break;
            }
        };
        for item in items {
            bytes += item.to_string().len();
            if listed.items.len() == caps.items || bytes > caps.bytes {
                listed.cut = Some(format!(
                    "it lists more {what} than Palaver keeps ({} {what} or {} MB); the first {} are used",
                    caps.items,
                    caps.bytes / (1024 * 1024),
                    listed.items.len()
                ));
                return listed;
            }
            listed.items.push(item);
        }
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    listed
}

/// Items of any serializable type as JSON values (those that do not serialize are left out).
pub fn values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|item| serde_json::to_value(item).ok())
        .collect()
}
