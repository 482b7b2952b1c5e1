//! The window a chat's requests must fit (SPEC §5): the context window (the chat's cap, the
//! provider's, or the one a provider reported when it refused a prompt — exactly that), the
//! answer's limit every request carries and keeps free, and how far the token estimate is
//! scaled after a provider counted a refused prompt larger than estimated.

use super::{ChatSession, Ctx};
use crate::config::EngineConfig;

/// How much larger than estimated a refused prompt is taken to be when the provider does not
/// say its size (a fifth).
const UNCOUNTED_SCALE: f64 = 1.2;

impl ChatSession {
    /// The context window: the thread's cap, else its provider's window, else the engine default;
    /// never more than a window a provider reported in a context-too-long error.
    pub(crate) fn n_ctx(&self, config: &EngineConfig) -> u64 {
        let configured = self
            .thread
            .context_tokens_cap
            .or_else(|| {
                config
                    .provider_for(self.answering_provider(config))
                    .and_then(|p| p.n_ctx)
            })
            .unwrap_or(config.default_n_ctx);
        self.learned_n_ctx
            .map_or(configured, |learned| configured.min(learned))
            .max(1)
    }

    /// Tokens the history may take (SPEC §5), for this thread and these fixed parts.
    pub(super) fn history_budget(
        &self,
        ctx: &Ctx,
        system_prompt: Option<&str>,
        tools: &[crate::tools::ToolSpec],
    ) -> u64 {
        let budget = crate::history_limit::history_budget(
            self.n_ctx(ctx.config),
            Some(self.output_tokens(ctx.config)),
            crate::request::fixed_chars(system_prompt, tools),
        );
        (budget as f64 / self.estimate_scale) as u64
    }

    /// The answer's limit this chat's next request carries (and keeps free in the window).
    pub(crate) fn output_tokens(&self, config: &crate::config::EngineConfig) -> u64 {
        // The answering model's override changes the provider and model only, not the chat's
        // own answer limit: the chat's thread is read as it is.
        let n_ctx = self.n_ctx(config);
        match config.provider_for(self.answering_provider(config)) {
            Some(provider) => provider.output_tokens(&self.thread, n_ctx),
            None => crate::request::ProviderConfig::default().output_tokens(&self.thread, n_ctx),
        }
    }

    /// A provider refused a prompt the window should have held: the estimate was short. Scaled
    /// by what it counted over what was estimated (else a fifth), never down, at most fourfold.
    pub(super) fn learn_estimate_scale(&mut self, ctx: &Ctx, counted: Option<u64>) {
        let system_prompt = self.system_prompt(ctx.config);
        let tools = self.offered_tools(ctx.config);
        let estimated =
            self.estimate_history() + crate::request::fixed_chars(system_prompt, &tools) as u64 / 4;
        let seen = match counted {
            Some(counted) if estimated > 0 => counted as f64 / estimated as f64,
            _ => self.estimate_scale * UNCOUNTED_SCALE,
        };
        self.estimate_scale = seen.clamp(self.estimate_scale, 4.0);
    }
}

impl ChatSession {
    /// The app's own words when even the last message does not fit: what it needs, what the
    /// window leaves, and how much to remove (never worded as the provider's).
    pub(super) fn too_large_sentence(
        &self,
        config: &EngineConfig,
        estimated: u64,
        budget: u64,
        system_prompt: Option<&str>,
        tools: &[crate::tools::ToolSpec],
    ) -> String {
        let n_ctx = self.n_ctx(config);
        let output = self.output_tokens(config);
        let fixed = crate::request::fixed_chars(system_prompt, tools) as u64 / 4;
        let over = estimated.saturating_sub(budget).max(1);
        format!(
            "Your message is too long for this model: with what must go with it, it needs about {} tokens, and the {}-token window leaves {} ({} are kept for the answer, {} for the instructions and tools). Remove about {} tokens (≈ {} characters), or raise the window or lower \"Max output tokens\" in Settings.",
            grouped(estimated),
            grouped(n_ctx),
            grouped(budget),
            grouped(output),
            grouped(fixed),
            grouped(over),
            grouped(over * 4)
        )
    }
}

/// `9532` → `9,532`: the numbers a person reads, grouped as the page groups them.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
