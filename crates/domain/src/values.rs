//! Validated values. Each type has a private field and a fallible constructor
//! for anything a client sent, so holding one is proof that the rule was
//! checked (contract C2, C3).

use std::fmt;
use std::sync::Arc;

/// Why a raw value was refused. The message is written for the client: it
/// names the rule, never the implementation.
///
/// ```
/// use items_domain::Name;
///
/// let refused = Name::parse("").unwrap_err();
/// assert_eq!(refused.message(), "must be a string of 1 to 256 characters");
/// assert_eq!(refused.to_string(), refused.message());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidValue(&'static str);

impl InvalidValue {
    /// A refusal for the rule `message` (for value types outside this module).
    pub(crate) const fn new(message: &'static str) -> Self {
        Self(message)
    }

    /// The human-readable rule that was broken.
    pub fn message(&self) -> &'static str {
        self.0
    }
}

/// The identifier of an item, a product or a user (contract C2).
///
/// ```
/// use items_domain::Id;
///
/// let id = Id::parse("42").expect("a base-10 integer");
/// assert_eq!(id, Id::new(42));
/// assert_eq!(id.get(), 42);
/// assert_eq!(format!("/items/{id}"), "/items/42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(i64);

impl Id {
    /// Wraps an id that came from a trusted source (a counter, a database
    /// column). Ids from clients go through [`Id::parse`].
    pub const fn new(value: i64) -> Self {
        Self(value)
    }

    /// Parses a path or query id: an optional `-`, then ASCII digits only,
    /// within the signed 64-bit range (C2). `+1`, ` 1`, `1.5`, `12abc` and
    /// numbers too large are refused — `i64::from_str` alone would accept `+1`.
    ///
    /// ```
    /// use items_domain::Id;
    ///
    /// assert_eq!(Id::parse("007"), Some(Id::new(7)));
    /// assert_eq!(Id::parse("-3"), Some(Id::new(-3)));
    /// for not_an_id in ["", "+1", " 1", "1.5", "12abc", "9223372036854775808"] {
    ///     assert_eq!(Id::parse(not_an_id), None);
    /// }
    /// ```
    pub fn parse(raw: &str) -> Option<Self> {
        let digits = raw.strip_prefix('-').unwrap_or(raw);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        raw.parse().ok().map(Self)
    }

    /// The id as a number, for storage and for the wire.
    pub const fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The name of an item or a product: 1 to 256 Unicode scalar values, kept
/// exactly as sent (not trimmed) (C3).
///
/// Held as `Arc<str>` so that handing a name to a listing snapshot or to a
/// response is a reference-count bump, not a copy.
///
/// ```
/// use items_domain::Name;
///
/// let name = Name::parse("  a pen ").expect("1 to 256 characters");
/// assert_eq!(name.as_str(), "  a pen ", "kept exactly as sent");
/// assert!(Name::parse("").is_err());
/// assert!(Name::parse(&"é".repeat(Name::MAX_CHARS + 1)).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    /// The most Unicode scalar values a name may hold.
    pub const MAX_CHARS: usize = 256;
    /// The rule a refused name broke, also for a value that is not text at all.
    pub const INVALID: InvalidValue = InvalidValue("must be a string of 1 to 256 characters");

    /// Checks a name a client sent.
    ///
    /// # Errors
    /// [`InvalidValue`] when `raw` is empty or longer than [`Name::MAX_CHARS`].
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        // `chars().count()` counts scalar values; the byte length bounds it
        // from above (<= 4 bytes each), which spares the count for most inputs.
        let valid = !raw.is_empty()
            && (raw.len() <= Self::MAX_CHARS || raw.chars().count() <= Self::MAX_CHARS);
        if valid {
            Ok(Self(Arc::from(raw)))
        } else {
            Err(Self::INVALID)
        }
    }

    /// The name as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A product price: a finite number, zero or more (C3).
///
/// ```
/// use items_domain::Price;
///
/// assert_eq!(Price::new(1.5).map(Price::get), Ok(1.5));
/// assert!(Price::new(-0.01).is_err());
/// assert!(Price::new(f64::NAN).is_err());
/// // A negative zero is stored as zero, so it is never echoed as `-0`.
/// assert!(Price::new(-0.0).unwrap().get().is_sign_positive());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Price(f64);

impl Price {
    /// The rule a refused price broke, also for a value that is not a number.
    pub const INVALID: InvalidValue = InvalidValue("must be a finite number >= 0");

    /// Checks a price a client sent.
    ///
    /// # Errors
    /// [`InvalidValue`] when `value` is negative, infinite or not a number.
    pub fn new(value: f64) -> Result<Self, InvalidValue> {
        if value.is_finite() && value >= 0.0 {
            // `-0.0 >= 0.0` holds; store it as `0` so it is never echoed as `-0`.
            Ok(Self(value + 0.0))
        } else {
            Err(Self::INVALID)
        }
    }

    /// The price as a number.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// How many items one page of a listing may hold: 1 to 1000 (C10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimit(u16);

impl PageLimit {
    pub const MAX: u16 = 1000;
    /// The rule a refused limit broke.
    pub const INVALID: InvalidValue = InvalidValue("must be an integer from 1 to 1000");

    pub fn new(value: u64) -> Result<Self, InvalidValue> {
        match u16::try_from(value) {
            Ok(v) if (1..=Self::MAX).contains(&v) => Ok(Self(v)),
            _ => Err(Self::INVALID),
        }
    }

    /// Parses a `limit` query value (C10): ASCII digits only, from 1 to
    /// 1000. A sign, spaces, a fraction or an empty value are refused —
    /// `u64::from_str` alone would accept `+5`.
    ///
    /// ```
    /// use items_domain::PageLimit;
    ///
    /// assert_eq!(PageLimit::parse("50").map(PageLimit::get), Ok(50));
    /// assert_eq!(PageLimit::parse("0010").map(PageLimit::get), Ok(10));
    /// for refused in ["0", "1001", "+5", "-1", "1.5", " 7", ""] {
    ///     let rule = PageLimit::parse(refused).unwrap_err();
    ///     assert_eq!(rule.message(), "must be an integer from 1 to 1000");
    /// }
    /// ```
    ///
    /// # Errors
    /// [`PageLimit::INVALID`] for anything else.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Self::INVALID);
        }
        raw.parse().map_err(|_| Self::INVALID).and_then(Self::new)
    }

    pub fn get(self) -> usize {
        usize::from(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_base_10_integers_with_an_optional_minus_c2() {
        assert_eq!(Id::parse("7"), Some(Id::new(7)));
        assert_eq!(Id::parse("007"), Some(Id::new(7)));
        assert_eq!(Id::parse("-3"), Some(Id::new(-3)));
        assert_eq!(Id::parse("9223372036854775807"), Some(Id::new(i64::MAX)));
        assert_eq!(Id::parse("-9223372036854775808"), Some(Id::new(i64::MIN)));
    }

    #[test]
    fn anything_else_is_not_an_id_c2() {
        for raw in [
            "",
            "-",
            "+1",
            " 1",
            "1 ",
            "1.5",
            "12abc",
            "abc",
            "0x10",
            "1e3",
            "--1",
            "9223372036854775808",
            "99999999999999999999999",
        ] {
            assert_eq!(Id::parse(raw), None, "{raw:?} must not parse");
        }
    }

    #[test]
    fn names_hold_1_to_256_scalar_values_untrimmed_c3() {
        assert_eq!(Name::parse("a").unwrap().as_str(), "a");
        assert_eq!(Name::parse("  padded ").unwrap().as_str(), "  padded ");
        assert!(Name::parse(&"x".repeat(256)).is_ok());
        // 256 four-byte scalar values are 1024 bytes and still valid.
        assert!(Name::parse(&"😀".repeat(256)).is_ok());
        assert!(Name::parse("").is_err());
        assert!(Name::parse(&"x".repeat(257)).is_err());
        assert!(Name::parse(&"é".repeat(257)).is_err());
    }

    #[test]
    fn prices_are_finite_and_not_negative_c3() {
        assert_eq!(Price::new(9.99).unwrap().get(), 9.99);
        assert_eq!(Price::new(0.0).unwrap().get(), 0.0);
        assert!(Price::new(-0.0).unwrap().get().is_sign_positive());
        assert!(Price::new(-0.01).is_err());
        assert!(Price::new(f64::NAN).is_err());
        assert!(Price::new(f64::INFINITY).is_err());
    }

    #[test]
    fn page_limits_run_from_1_to_1000_c10() {
        assert_eq!(PageLimit::new(1).unwrap().get(), 1);
        assert_eq!(PageLimit::new(1000).unwrap().get(), 1000);
        assert!(PageLimit::new(0).is_err());
        assert!(PageLimit::new(1001).is_err());
        assert!(PageLimit::new(u64::MAX).is_err());
    }

    #[test]
    fn page_limits_parse_from_digits_only_c10() {
        assert_eq!(PageLimit::parse("1"), PageLimit::new(1));
        assert_eq!(PageLimit::parse("1000"), PageLimit::new(1000));
        assert_eq!(PageLimit::parse("007"), PageLimit::new(7));
        for raw in [
            "",
            "0",
            "1001",
            "+5",
            "-1",
            "1.5",
            " 7",
            "7 ",
            "1e2",
            "0x10",
            "abc",
            "99999999999999999999999",
        ] {
            assert_eq!(PageLimit::parse(raw), Err(PageLimit::INVALID), "{raw:?}");
        }
    }
}
