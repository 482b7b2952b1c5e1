//! Palaver: a chat-agent engine. The core (every module not gated below) is sans-IO:
//! `Engine::handle(now, Input) -> Step { events, effects }`. Hosts perform the effects:
//! `web` in the browser (wasm32 only), `proxy` and `cli` natively. See ARCHITECTURE.md.

pub mod collector;
pub mod command;
pub mod config;
pub mod decode;
pub mod delta;
pub mod edit_blocks;
pub mod effect;
pub mod engine;
pub mod error;
pub mod event;
pub mod export;
pub mod hidden;
pub mod history_limit;
pub mod images;
pub mod json_text;
pub mod linearize;
pub mod message;
pub mod message_search;
pub mod mirror;
pub mod plan;
pub mod prompt;
pub mod provider;
pub mod queue;
pub mod replication;
pub mod request;
pub mod retry;
pub mod session;
pub mod sse;
pub mod stability;
pub mod subagents;
pub mod tagged;
pub mod thinking;
pub mod thread;
pub mod tools;
pub mod trajectory;

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
pub mod proxy;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use engine::{Effect, Engine, EngineConfig, Input, Step};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
