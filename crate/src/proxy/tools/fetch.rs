//! `fetch_url`: http(s) only; loopback, private, link-local, CGNAT, multicast and unspecified
//! addresses refused — for IP literals before connecting, for names in the resolver, so the
//! connection goes to the vetted address (no second resolution). Redirects are not followed;
//! size and time are capped. Proxies from the environment are ignored: a proxy would resolve the
//! name itself, past the vetting.

use super::{str_arg, ToolReply};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::{json, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

const MAX_BYTES: usize = 2 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(20);

pub async fn fetch_url(args: &Value) -> ToolReply {
    let raw = match str_arg(args, "url") {
        Ok(url) => url,
        Err(reply) => return reply,
    };
    let url = match reqwest::Url::parse(raw) {
        Ok(url) => url,
        Err(e) => return ToolReply::failed("bad_url", format!("not a URL: {e}")),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return ToolReply::refused(
            403,
            "scheme_not_allowed",
            format!(
                "only http and https URLs are fetched, not {}:",
                url.scheme()
            ),
        );
    }
    if let Some(host) = url.host() {
        let literal = match host {
            url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            url::Host::Domain(_) => None,
        };
        if let Some(ip) = literal.filter(|ip| is_forbidden_ip(*ip)) {
            return ToolReply::refused(
                403,
                "address_not_allowed",
                format!("{ip} is a local or private address"),
            );
        }
    }
    match fetch(url).await {
        Ok(reply) => reply,
        Err(e) if is_vetting_error(&e) => ToolReply::refused(
            403,
            "address_not_allowed",
            "the name resolves to a local or private address".into(),
        ),
        Err(e) => ToolReply::failed("fetch_failed", format!("the fetch failed: {e}")),
    }
}

async fn fetch(url: reqwest::Url) -> Result<ToolReply, reqwest::Error> {
    let client = reqwest::Client::builder()
        .dns_resolver(Arc::new(VettingResolver))
        // HTTP(S)_PROXY / ALL_PROXY would send the request to a proxy that resolves the name
        // itself, past the vetting resolver (and a loopback proxy would reach local services).
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .build()?;
    let mut response = client.get(url).send().await?;
    let status = response.status().as_u16();
    if response.status().is_redirection() {
        let location = response
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or("")
            .to_string();
        return Ok(ToolReply::failed(
            "redirect_not_followed",
            format!("HTTP {status}: redirects are not followed (to {location})"),
        ));
    }
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() >= room {
            truncated = true;
            break;
        }
    }
    let text = String::from_utf8_lossy(&body).to_string();
    Ok(ToolReply {
        status: 200,
        is_error: status >= 400,
        content: text,
        data: Some(json!({"status": status, "truncated": truncated})),
        error: None,
    })
}

const VETTING_MESSAGE: &str = "palaver: address not allowed";

fn is_vetting_error(error: &reqwest::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        if e.to_string().contains(VETTING_MESSAGE) {
            return true;
        }
        source = e.source();
    }
    false
}

/// Resolves names and refuses the whole name if any address is local or private.
struct VettingResolver;

impl Resolve for VettingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::task::spawn_blocking(move || {
                (host.as_str(), 0).to_socket_addrs().map(Iterator::collect)
            })
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)??;
            if addrs.is_empty() || addrs.iter().any(|a| is_forbidden_ip(a.ip())) {
                return Err(VETTING_MESSAGE.into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Addresses a tool may not reach: this machine, private networks, link-local (cloud metadata).
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || a >= 240
}

fn forbidden_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    let segments = ip.segments();
    let nat64 = segments[0] == 0x64 && segments[1] == 0xff9b && segments[2..6] == [0, 0, 0, 0];
    if nat64 {
        let v4 = Ipv4Addr::new(
            (segments[6] >> 8) as u8,
            segments[6] as u8,
            (segments[7] >> 8) as u8,
            segments[7] as u8,
        );
        return forbidden_v4(v4);
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (segments[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (segments[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (segments[0] & 0xffc0) == 0xfec0 // deprecated site-local fec0::/10
        || (segments[0] == 0 && segments[1..6] == [0, 0, 0, 0, 0]) // IPv4-compatible ::a.b.c.d
}
