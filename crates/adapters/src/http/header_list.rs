//! Reading a header whose value is a comma-separated list (RFC 9110 §5.6.1),
//! such as `If-Match` or `X-Forwarded-For`, where several header lines of
//! the same name are one list (§5.3).

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
}
