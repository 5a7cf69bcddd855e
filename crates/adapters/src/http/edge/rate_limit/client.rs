//! Who the client is, for its rate-limit budget (C1, C9): the peer address,
//! or with `TRUST_PROXY=N` the address our outermost proxy reported in
//! `X-Forwarded-For` (or `Forwarded: for=`); IPv6 clients by their /56.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use actix_web::dev::ServiceRequest;
use actix_web::http::header::{self, HeaderMap};

use crate::http::support::header_list;

/// The rate-limit key: the client's IP address; IPv6 clients by their /56
/// prefix (one subscriber's usual allocation, and express-rate-limit's default).
pub(super) fn client_key(request: &ServiceRequest, trust_proxy: u32) -> IpAddr {
    let forwarded = usize::try_from(trust_proxy)
        .ok()
        .filter(|hops| *hops > 0)
        .and_then(|hops| forwarded_client(request.headers(), hops));
    // A request with no peer address (never over TCP) shares one key rather
    // than failing: the limiter must not turn into a 500.
    let address = forwarded
        .or_else(|| request.peer_addr().map(|peer| peer.ip()))
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    match address.to_canonical() {
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[7..].fill(0);
            IpAddr::from(octets)
        }
        v4 => v4,
    }
}

/// The client as `hops` proxies of ours report it: the `hops`-th address
/// from the right of `X-Forwarded-For`, or of `Forwarded: for=` when no
/// `X-Forwarded-For` was sent. Each proxy appends the address it received
/// from, so entries further left were written by the client itself and are
/// never used; with fewer entries than `hops`, the leftmost present is the
/// best there is. `X-Forwarded-For` comes first because it is the header
/// proxies append to (haproxy's `option forwardfor`, nginx's
/// `$proxy_add_x_forwarded_for`): a `Forwarded` header behind such a proxy
/// was written by the client. An entry that is not an address (`unknown`,
/// garbage) gives `None`: the peer is used.
fn forwarded_client(headers: &HeaderMap, hops: usize) -> Option<IpAddr> {
    let entries: Vec<&str> = if headers.contains_key(header::X_FORWARDED_FOR) {
        header_list::elements(headers, &header::X_FORWARDED_FOR).collect()
    } else {
        header_list::elements(headers, &header::FORWARDED)
            .filter_map(forwarded_for)
            .collect()
    };
    let index = entries.len().saturating_sub(hops);
    entries.get(index).copied().and_then(parse_address)
}

/// The `for=` parameter of one `Forwarded` element (`for=1.2.3.4;proto=http`).
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then_some(value)
    })
}

/// Reads an address as proxies write it: `1.2.3.4`, `1.2.3.4:80`, `::1`,
/// `[::1]:80`, `"[::1]"`; `unknown` or garbage gives `None`.
fn parse_address(raw: &str) -> Option<IpAddr> {
    let raw = raw.trim().trim_matches('"');
    raw.parse::<IpAddr>()
        .ok()
        .or_else(|| raw.parse::<SocketAddr>().ok().map(|socket| socket.ip()))
        .or_else(|| raw.strip_prefix('[')?.split(']').next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderName, HeaderValue};

    use super::*;

    #[test]
    fn proxy_addresses_are_read_leniently_c9() {
        assert_eq!(
            parse_address("203.0.113.7"),
            Some("203.0.113.7".parse().unwrap())
        );
        assert_eq!(
            parse_address("203.0.113.7:4711"),
            Some("203.0.113.7".parse().unwrap())
        );
        assert_eq!(
            parse_address("[2001:db8::1]:80"),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            parse_address("\"[2001:db8::1]\""),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            parse_address("2001:db8::1"),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(parse_address("unknown"), None);
        assert_eq!(parse_address("_hidden"), None);
        assert_eq!(parse_address(""), None);
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::try_from(*name).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    fn ip(raw: &str) -> Option<IpAddr> {
        Some(raw.parse().unwrap())
    }

    #[test]
    fn the_client_is_the_nth_forwarded_address_from_the_right_c1_c9() {
        let sent = headers(&[("x-forwarded-for", "10.0.0.1, 198.51.100.2, 203.0.113.7")]);
        assert_eq!(forwarded_client(&sent, 1), ip("203.0.113.7"));
        assert_eq!(forwarded_client(&sent, 2), ip("198.51.100.2"));
        assert_eq!(forwarded_client(&sent, 3), ip("10.0.0.1"));
        // Fewer entries than proxies: the leftmost present, never beyond it.
        assert_eq!(forwarded_client(&sent, 9), ip("10.0.0.1"));
    }

    #[test]
    fn several_forwarded_for_lines_are_one_list_c9() {
        let sent = headers(&[
            ("x-forwarded-for", "10.0.0.1"),
            ("x-forwarded-for", "203.0.113.7"),
        ]);
        assert_eq!(forwarded_client(&sent, 1), ip("203.0.113.7"));
    }

    #[test]
    fn the_forwarded_header_is_read_by_its_for_parameters_c9() {
        let sent = headers(&[(
            "forwarded",
            "for=10.0.0.1;proto=http, for=\"[2001:db8::7]:4711\";by=proxy",
        )]);
        assert_eq!(forwarded_client(&sent, 1), ip("2001:db8::7"));
        assert_eq!(forwarded_client(&sent, 2), ip("10.0.0.1"));
    }

    #[test]
    fn a_forwarded_header_beside_x_forwarded_for_is_the_clients_own_c9() {
        let sent = headers(&[
            ("forwarded", "for=10.0.0.1"),
            ("x-forwarded-for", "10.0.0.2, 203.0.113.7"),
        ]);
        assert_eq!(forwarded_client(&sent, 1), ip("203.0.113.7"));
    }

    #[test]
    fn no_forwarded_header_or_garbage_names_no_client_c9() {
        assert_eq!(forwarded_client(&HeaderMap::new(), 1), None);
        let sent = headers(&[("x-forwarded-for", "10.0.0.1, unknown")]);
        assert_eq!(forwarded_client(&sent, 1), None);
    }
}
