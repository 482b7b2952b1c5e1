//! Retries (SPEC §6.5, SECURITY D5 and D10–D14, D24): what a failure is, whether waiting can fix
//! it, and how long to wait. Pure functions: the time and the seed come from the host.

use litemap::LiteMap;
use serde::{Deserialize, Serialize};

/// The error taxonomy the UI shows (SECURITY D24): each class has its own remedy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The provider is overloaded (529, `overloaded_error`): an automatic retry with a countdown.
    Overloaded,
    /// Too many requests (429 without a quota type): wait for `retry-after`.
    RateLimited,
    /// Out of credit or over a spending limit: no wait fixes it; the user goes to billing.
    Quota,
    /// The key is wrong or lacks rights (401, 403): the user fixes the key.
    Auth,
    /// The connection failed or broke (no HTTP status).
    Network,
    /// The stream ended before the provider said it finished.
    Truncated,
    /// No bytes for the idle timeout while streaming.
    IdleTimeout,
    /// No response (not even headers) within the first-byte timeout.
    FirstByteTimeout,
    /// The request is too large for the provider (413): the history limit must cut more.
    RequestTooLarge,
    /// The provider refused the request as invalid (400, 404, 422, …): a retry sends the same.
    BadRequest,
    /// A server-side failure (5xx, `api_error`, `server_error`).
    ServerError,
    /// The stream itself was malformed (bad JSON, bad UTF-8, a protocol violation).
    Malformed,
    /// The model cannot take what was sent (images to a text-only model): no retry helps.
    Unsupported,
    /// Anything else.
    #[default]
    Other,
}

/// Whether a provider's error says the model does not take images (llama.cpp's "image input is
/// not supported", OpenAI-compatible servers' "does not support image input", …).
pub fn images_refused(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("image")
        && (lower.contains("not supported")
            || lower.contains("does not support")
            || lower.contains("unsupported"))
}

/// How many attempts a request gets and the first backoff (SPEC §6.5: 4 attempts, from 1 s).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    #[serde(default = "default_base_ms")]
    pub base_ms: u64,
}

fn default_max_attempts() -> u32 {
    4
}

fn default_base_ms() -> u64 {
    1000
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: default_max_attempts(),
            base_ms: default_base_ms(),
        }
    }
}

/// A failure's class and whether another attempt may succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub class: ErrorClass,
    pub retryable: bool,
}

/// Statuses that another attempt may fix (SECURITY D14).
const RETRYABLE_STATUSES: [u16; 9] = [408, 409, 429, 500, 501, 502, 503, 504, 529];

/// Error types that no wait will fix: retrying only burns attempts (SECURITY D5).
const QUOTA_TYPES: [&str; 5] = [
    "insufficient_quota",
    "billing_error",
    "enforced_spend_limit_reached",
    "quota_exceeded",
    "billing_not_active",
];

/// Classifies a request that failed before its stream began: an HTTP status (none for a network
/// error), the provider's error type from the body, and the response headers (lower-case names).
pub fn classify_request(
    status: Option<u16>,
    error_type: Option<&str>,
    headers: &LiteMap<String, String>,
) -> Verdict {
    let class = if error_type.is_some_and(is_quota_type) {
        ErrorClass::Quota
    } else if matches!(status, Some(401 | 403)) {
        // OpenAI answers a bad key with 401 and the generic `invalid_request_error`: the status
        // says what the user must fix.
        ErrorClass::Auth
    } else if status == Some(413) {
        ErrorClass::RequestTooLarge
    } else if let Some(class) = error_type.and_then(type_class) {
        class
    } else {
        status.map_or(ErrorClass::Network, status_class)
    };
    let mut retryable = match class {
        ErrorClass::Quota | ErrorClass::Auth | ErrorClass::RequestTooLarge => false,
        ErrorClass::Network | ErrorClass::FirstByteTimeout => true,
        _ => status.is_some_and(|s| RETRYABLE_STATUSES.contains(&s)) || type_retryable(class),
    };
    // The server's own word wins (as in the official SDKs), except that no header makes a quota,
    // key or size problem go away.
    if !matches!(
        class,
        ErrorClass::Quota | ErrorClass::Auth | ErrorClass::RequestTooLarge
    ) {
        match header(headers, "x-should-retry") {
            Some("true") => retryable = true,
            Some("false") => retryable = false,
            _ => {}
        }
    }
    Verdict { class, retryable }
}

/// Classifies a failure that happened in the stream: the provider's mid-stream error type, or
/// one of the engine's own codes (`truncated`, `stalled`, `malformed_stream`, …).
pub fn classify_stream(code: &str) -> Verdict {
    let class = if is_quota_type(code) {
        ErrorClass::Quota
    } else if let Some(class) = type_class(code) {
        class
    } else {
        match code {
            "truncated" => ErrorClass::Truncated,
            "stalled" | "idle_timeout" => ErrorClass::IdleTimeout,
            "first_byte_timeout" => ErrorClass::FirstByteTimeout,
            "network_error" | "connection_reset" => ErrorClass::Network,
            "malformed_stream" | "provider_misbehaved" | "stream_too_large" => {
                ErrorClass::Malformed
            }
            _ => match code.parse::<u16>() {
                Ok(status) => status_class(status),
                Err(_) => ErrorClass::Other,
            },
        }
    };
    let retryable = match class {
        ErrorClass::Overloaded
        | ErrorClass::RateLimited
        | ErrorClass::ServerError
        | ErrorClass::Network
        | ErrorClass::Truncated
        | ErrorClass::IdleTimeout
        | ErrorClass::FirstByteTimeout => true,
        _ => code
            .parse::<u16>()
            .is_ok_and(|s| RETRYABLE_STATUSES.contains(&s)),
    };
    Verdict { class, retryable }
}

fn is_quota_type(t: &str) -> bool {
    QUOTA_TYPES.contains(&t)
}

/// The class a provider error type names, when it names one.
fn type_class(t: &str) -> Option<ErrorClass> {
    Some(match t {
        "overloaded_error" | "overloaded" => ErrorClass::Overloaded,
        "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => {
            ErrorClass::RateLimited
        }
        "api_error" | "server_error" | "internal_error" | "INTERNAL" | "UNAVAILABLE" => {
            ErrorClass::ServerError
        }
        "authentication_error"
        | "permission_error"
        | "invalid_api_key"
        | "UNAUTHENTICATED"
        | "PERMISSION_DENIED" => ErrorClass::Auth,
        "request_too_large" | "context_length_exceeded" => ErrorClass::RequestTooLarge,
        "invalid_request_error" | "not_found_error" | "INVALID_ARGUMENT" | "NOT_FOUND" => {
            ErrorClass::BadRequest
        }
        _ => return None,
    })
}

fn type_retryable(class: ErrorClass) -> bool {
    matches!(
        class,
        ErrorClass::Overloaded | ErrorClass::RateLimited | ErrorClass::ServerError
    )
}

fn status_class(status: u16) -> ErrorClass {
    match status {
        401 | 403 => ErrorClass::Auth,
        413 => ErrorClass::RequestTooLarge,
        429 => ErrorClass::RateLimited,
        529 => ErrorClass::Overloaded,
        408 => ErrorClass::Network,
        500..=599 => ErrorClass::ServerError,
        400..=499 => ErrorClass::BadRequest,
        _ => ErrorClass::Other,
    }
}

fn header<'a>(headers: &'a LiteMap<String, String>, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// The longest wait a server may ask for; longer asks fall back to backoff (the rule of the
/// Python and openai-node SDKs, not anthropic-ts's unbounded one: SECURITY decision 6).
pub const MAX_RETRY_AFTER_MS: u64 = 60_000;

/// The wait the server asks for, if it is sane: `retry-after-ms` (milliseconds) wins over
/// `retry-after` (seconds, or an HTTP date compared with `now_ms`, the host's Unix time). Only
/// waits in (0, 60 s] count (SECURITY D12).
pub fn retry_after_ms(headers: &LiteMap<String, String>, now_ms: u64) -> Option<u64> {
    let asked = header(headers, "retry-after-ms")
        .and_then(parse_seconds_like)
        .or_else(|| {
            header(headers, "retry-after").and_then(|v| {
                parse_seconds_like(v)
                    .map(|s| s * 1000.0)
                    .or_else(|| http_date_ms(v).map(|at| at as f64 - now_ms as f64))
            })
        })?;
    (asked > 0.0 && asked <= MAX_RETRY_AFTER_MS as f64).then(|| asked.ceil() as u64)
}

fn parse_seconds_like(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite())
}

fn http_date_ms(v: &str) -> Option<u64> {
    let at = httpdate::parse_http_date(v).ok()?;
    at.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

/// Exponential backoff: `base × 2^(attempt−1)`, capped at 60 s, times a jitter in [0.75, 1.0]
/// drawn from the host's seed (the openai/anthropic SDK form), so retries spread out but never
/// come sooner than three quarters of the plan.
pub fn backoff_ms(policy: &RetryPolicy, seed: u64, attempt: u32) -> u64 {
    let exponent = attempt.saturating_sub(1).min(20);
    let planned = policy
        .base_ms
        .saturating_mul(1u64 << exponent)
        .min(MAX_RETRY_AFTER_MS);
    let permille = 750 + mix(seed, attempt) % 251; // 750‰ … 1000‰
    (planned.saturating_mul(permille) / 1000).max(1)
}

/// A splitmix-style hash of the seed and the attempt: the same inputs give the same jitter.
fn mix(seed: u64, attempt: u32) -> u64 {
    let mut x = seed ^ u64::from(attempt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// What a "context too long" refusal says: that it is one, the window it reports, and how many
/// tokens the provider counted in the prompt it refused, when it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextOverflow {
    pub window: Option<u64>,
    pub prompt_tokens: Option<u64>,
}

/// Phrases providers use when the prompt does not fit the model's window: OpenAI
/// (`context_length_exceeded`, "maximum context length is N tokens"), Anthropic ("prompt is too
/// long: X tokens > N maximum"), Gemini ("input token count (X) exceeds the maximum number of
/// tokens allowed (N)"), llama.cpp (`exceed_context_size_error`, "exceeds the available context
/// size", `n_ctx` in the body), Ollama ("input length exceeds the context length"), vLLM and
/// LM Studio ("maximum context length", "context length of only N tokens", "context overflow").
const OVERFLOW_PHRASES: [&str; 9] = [
    "prompt is too long",
    "maximum context length",
    "context length exceeded",
    "exceeds the maximum number of tokens",
    "exceeds the available context size",
    "exceeds the context length",
    "exceeds the context window",
    "context length of only",
    "context overflow",
];
const OVERFLOW_TYPES: [&str; 3] = [
    "context_length_exceeded",
    "exceed_context_size_error",
    "string_above_max_length",
];

/// Whether a failed request says the prompt exceeds the model's context window; `reported` is a
/// window the host found in the body (llama.cpp's `n_ctx`).
pub fn context_overflow(
    error_type: Option<&str>,
    message: &str,
    reported: Option<u64>,
) -> Option<ContextOverflow> {
    context_overflow_counted(error_type, message, reported, None)
}

/// [`context_overflow`] with the prompt's size the host found in the body (llama.cpp's
/// `n_prompt_tokens`), else the one the message names.
pub fn context_overflow_counted(
    error_type: Option<&str>,
    message: &str,
    reported: Option<u64>,
    counted: Option<u64>,
) -> Option<ContextOverflow> {
    let lower = message.to_ascii_lowercase();
    let named = error_type.is_some_and(|t| OVERFLOW_TYPES.contains(&t))
        || OVERFLOW_PHRASES.iter().any(|p| lower.contains(p));
    named.then(|| ContextOverflow {
        window: reported.filter(|w| *w > 0).or_else(|| window_in(&lower)),
        prompt_tokens: counted
            .filter(|t| *t > 0)
            .or_else(|| prompt_tokens_in(&lower)),
    })
}

/// The prompt's size a provider's message names: Anthropic's "prompt is too long: X tokens",
/// OpenAI's "your messages resulted in X tokens", Gemini's "input token count (X)", vLLM's
/// "(X in the messages".
fn prompt_tokens_in(lower: &str) -> Option<u64> {
    let after = |marker: &str| -> Option<u64> {
        let rest = &lower[lower.find(marker)? + marker.len()..];
        first_number(rest)
    };
    after("prompt is too long:")
        .or_else(|| after("messages resulted in"))
        .or_else(|| after("input token count ("))
        .or_else(|| {
            let end = lower.find(" in the messages")?;
            let start = lower[..end].rfind('(')?;
            first_number(&lower[start + 1..end])
        })
}

/// The window a provider's message names: the number after "maximum context length is", before
/// "maximum" in "X tokens > N maximum", in "tokens allowed (N)", after "context length of only".
fn window_in(lower: &str) -> Option<u64> {
    let after = |marker: &str| -> Option<u64> {
        let rest = &lower[lower.find(marker)? + marker.len()..];
        first_number(rest)
    };
    after("maximum context length is")
        .or_else(|| after("tokens allowed ("))
        .or_else(|| after("context length of only"))
        .or_else(|| after("context length is"))
        .or_else(|| {
            let end = lower.find(" maximum")?;
            let start = lower[..end].rfind('>')?;
            first_number(&lower[start + 1..end])
        })
}

fn first_number(text: &str) -> Option<u64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|n| *n > 0)
}
