//! `fetch_url`: http(s) only; loopback, private, link-local, CGNAT, multicast, unspecified and
//! documentation/benchmark addresses refused, and so is every address of this machine's own
//! interfaces, looked up at call time (a service bound to all interfaces answers there; E6) — for
//! IP literals before connecting, for names in the resolver, so the connection goes to the vetted
//! address (no second resolution). Literals in other spellings (decimal, `::ffff:`) are
//! normalised by the URL parser and the mapped-address check first. Redirects are not followed;
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
        if let Some(ip) = literal.filter(|ip| is_forbidden_ip(*ip) || is_own_address(*ip)) {
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
    crate::proxy::process_env::install_tls();
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
        parts: Vec::new(),
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
            if addrs.is_empty()
                || addrs
                    .iter()
                    .any(|a| is_forbidden_ip(a.ip()) || is_own_address(a.ip()))
            {
                return Err(VETTING_MESSAGE.into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The addresses of this machine's interfaces now (`getifaddrs`), IPv4-mapped ones unwrapped.
pub fn own_addresses() -> Vec<IpAddr> {
    let mut found = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list that is only read here and freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return found;
    }
    let mut cursor = list;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, not yet freed.
        let node = unsafe { &*cursor };
        if let Some(ip) = unsafe { socket_ip(node.ifa_addr) } {
            found.push(ip);
        }
        cursor = node.ifa_next;
    }
    // SAFETY: frees the list getifaddrs allocated, once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// The IP in a `sockaddr` of family AF_INET or AF_INET6.
///
/// # Safety
/// `addr` is null or points to a valid `sockaddr` of the size its family implies.
unsafe fn socket_ip(addr: *const libc::sockaddr) -> Option<IpAddr> {
    if addr.is_null() {
        return None;
    }
    match i32::from((*addr).sa_family) {
        libc::AF_INET => {
            let v4 = &*(addr as *const libc::sockaddr_in);
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))))
        }
        libc::AF_INET6 => {
            let v6 = &*(addr as *const libc::sockaddr_in6);
            Some(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

/// Whether `ip` is one of this machine's own addresses (looked up now: interfaces change).
pub fn is_own_address(ip: IpAddr) -> bool {
    let ip = canonical(ip);
    own_addresses().into_iter().any(|own| canonical(own) == ip)
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Addresses a tool may not reach: this machine, private networks, link-local (cloud metadata),
/// documentation and benchmark ranges (never a public service; test networks use them).
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
        || (a == 192 && b == 0 && ip.octets()[2] == 2) // TEST-NET-1 192.0.2/24
        || (a == 198 && b == 51 && ip.octets()[2] == 100) // TEST-NET-2 198.51.100/24
        || (a == 203 && b == 0 && ip.octets()[2] == 113) // TEST-NET-3 203.0.113/24
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18/15
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
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // documentation 2001:db8::/32
        || (segments[0] == 0 && segments[1..6] == [0, 0, 0, 0, 0]) // IPv4-compatible ::a.b.c.d
}
