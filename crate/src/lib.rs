//! Palaver: a chat-agent engine. The core (every module not gated below) is sans-IO:
//! `Engine::handle(now, Input) -> Step { events, effects }`. Hosts perform the effects:
//! `web` in the browser (wasm32 only), `proxy` and `cli` natively.

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
pub mod proxy;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
