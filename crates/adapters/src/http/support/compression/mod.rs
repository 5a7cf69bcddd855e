//! Content coding (C7), decided here alone: whether a response body is
//! compressed, in which coding and under which tag ([`Encoding`], its rules
//! in `encoding.rs`), and the encoders ([`StreamEncoder`]). The edge (a
//! body in memory: [`compress`], and the tags of `conditional.rs`) and the
//! streamed listing are each given an [`Encoding`] and apply it; none of
//! them reads `Accept-Encoding` or the threshold ([`MIN_BYTES`]) itself.

mod encoder;
mod encoding;

pub(crate) use encoder::StreamEncoder;
pub(crate) use encoding::{Encoding, MIN_BYTES, compress, same_representation};
