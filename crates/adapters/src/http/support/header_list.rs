//! Reading a header whose value is a comma-separated list (RFC 9110 §5.6.1),
//! such as `If-Match` or `X-Forwarded-For`, where several header lines of
//! the same name are one list (§5.3), and a list whose elements carry a
//! q-value (§12.4.2), such as `Accept` or `Accept-Encoding`.

use actix_web::http::header::{HeaderMap, HeaderName};

/// The elements of every `name` header, in order, each trimmed of the
/// whitespace around it. Empty elements are kept (a caller that counts
/// positions needs them); a value that is not visible ASCII is skipped.
pub(crate) fn elements<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
}

/// The elements of every `name` header as [`elements`] lists them, each
/// with its weight: the value before its parameters (trimmed) and its
/// `q` parameter, `1.0` when it has none or none that reads as a number.
/// An element that is empty is kept, as an empty value.
pub(crate) fn weighted<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> impl Iterator<Item = (&'a str, f32)> {
    elements(headers, name).map(|element| {
        let mut parts = element.split(';');
        let value = parts.next().unwrap_or("").trim();
        let q = parts
            .filter_map(|parameter| {
                let (key, value) = parameter.split_once('=')?;
                key.trim()
                    .eq_ignore_ascii_case("q")
                    .then(|| value.trim().parse::<f32>().ok())?
            })
            .next()
            .unwrap_or(1.0);
        (value, q)
    })
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{self, HeaderValue};

    use super::*;

    #[test]
    fn elements_of_several_lines_are_one_trimmed_list_with_empty_ones_kept() {
        let mut headers = HeaderMap::new();
        for line in ["\"a\", \"b\"", " , \"c\" "] {
            headers.append(header::IF_MATCH, HeaderValue::from_static(line));
        }
        let listed: Vec<&str> = elements(&headers, &header::IF_MATCH).collect();
        assert_eq!(listed, ["\"a\"", "\"b\"", "", "\"c\""]);
        assert_eq!(elements(&headers, &header::IF_NONE_MATCH).count(), 0);
    }

    #[test]
    fn weighted_elements_carry_their_q_value_or_one() {
        let mut headers = HeaderMap::new();
        for line in [
            "gzip;q=0.5, br",
            " zstd ; Q=0 ;level=3",
            "x;q=high, , *;q=0.1",
        ] {
            headers.append(header::ACCEPT_ENCODING, HeaderValue::from_static(line));
        }
        let listed: Vec<(&str, f32)> = weighted(&headers, &header::ACCEPT_ENCODING).collect();
        assert_eq!(
            listed,
            [
                ("gzip", 0.5),
                ("br", 1.0),
                ("zstd", 0.0),
                ("x", 1.0),
                ("", 1.0),
                ("*", 0.1)
            ]
        );
    }
}
