//! The Markdown renderer of Palaver's page, a crate of its own (issue 20): the engine never
//! renders, and the page loads this wasm (`pkg/render/`, about a tenth of the engine's size)
//! only when it first draws a message, so a first visit does not fetch it. `render` holds the
//! rules (SECURITY C1–C8); the JS function is `renderMarkdown`.

mod render;

pub use render::render_markdown;

#[cfg(target_arch = "wasm32")]
mod web {
    use wasm_bindgen::prelude::*;

    /// Model output (Markdown) as safe HTML: raw HTML shown as text, only http/https/mailto and
    /// relative links, remote images as click-to-load placeholders (SECURITY C1–C8).
    #[wasm_bindgen(js_name = renderMarkdown)]
    pub fn render_markdown(markdown: &str) -> String {
        super::render_markdown(markdown)
    }
}
