//! The codings the service sends and their encoders: a body compressed
//! whole, or chunk by chunk as it streams, each chunk flushed at once.
//!
//! Why these levels: zstd 3, brotli 4 and gzip 5 compress a listing of
//! items more than tenfold at a fraction of the cost of their maximum
//! levels (docs/performance.md, "How cost grows with the collection").

use std::io::Write;

use actix_web::http::header::HeaderValue;
use actix_web::web::Bytes;

/// A content coding the service sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Coding {
    Zstd,
    Brotli,
    Gzip,
}

impl Coding {
    /// In the server's order of preference, for ties.
    pub(super) const PREFERRED: [Self; 3] = [Self::Zstd, Self::Brotli, Self::Gzip];

    /// Its name in `Accept-Encoding` and `Content-Encoding`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Zstd => "zstd",
            Self::Brotli => "br",
            Self::Gzip => "gzip",
        }
    }

    /// `Content-Encoding: <name>`.
    pub(super) fn header_value(self) -> HeaderValue {
        HeaderValue::from_static(self.name())
    }

    /// `bytes`, compressed whole.
    pub(super) fn encode(self, bytes: &[u8]) -> std::io::Result<Bytes> {
        let mut encoder = StreamEncoder::new(self)?;
        let mut out = encoder.push(bytes)?;
        out.extend_from_slice(&encoder.finish()?);
        Ok(Bytes::from(out))
    }
}

/// A body's encoder, fed chunk by chunk: each [`StreamEncoder::push`]
/// returns the bytes that chunk makes, flushed so the client can decode
/// them at once (a body sent as it is comes out as it goes in).
pub(crate) struct StreamEncoder {
    inner: Inner,
}

enum Inner {
    Identity,
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
}

impl std::fmt::Debug for StreamEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamEncoder").finish_non_exhaustive()
    }
}

/// zstd's level: its default, fast and more than tenfold on listings.
const ZSTD_LEVEL: i32 = 3;
/// brotli's quality and window (2^20 bytes): its fast end, bounded memory.
const BROTLI_QUALITY: u32 = 4;
const BROTLI_WINDOW: u32 = 20;
/// gzip's level: between speed and ratio.
const GZIP_LEVEL: u32 = 5;
/// What each encoder buffers before it writes out on its own.
const BUFFER: usize = 16 * 1024;

impl StreamEncoder {
    /// An encoder in `coding`.
    pub(super) fn new(coding: Coding) -> std::io::Result<Self> {
        let inner = match coding {
            Coding::Zstd => Inner::Zstd(zstd::stream::write::Encoder::new(
                Vec::with_capacity(BUFFER),
                ZSTD_LEVEL,
            )?),
            Coding::Brotli => Inner::Brotli(Box::new(brotli::CompressorWriter::new(
                Vec::with_capacity(BUFFER),
                BUFFER,
                BROTLI_QUALITY,
                BROTLI_WINDOW,
            ))),
            Coding::Gzip => Inner::Gzip(flate2::write::GzEncoder::new(
                Vec::with_capacity(BUFFER),
                flate2::Compression::new(GZIP_LEVEL),
            )),
        };
        Ok(Self { inner })
    }

    /// An encoder of a body sent as it is: each chunk comes out unchanged.
    pub(super) fn identity() -> Self {
        Self {
            inner: Inner::Identity,
        }
    }

    /// Encodes `chunk` and returns what it made so far, flushed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> std::io::Result<Vec<u8>> {
        let out = match &mut self.inner {
            Inner::Identity => return Ok(chunk.to_vec()),
            Inner::Zstd(encoder) => {
                encoder.write_all(chunk)?;
                encoder.flush()?;
                encoder.get_mut()
            }
            Inner::Brotli(encoder) => {
                encoder.write_all(chunk)?;
                encoder.flush()?;
                encoder.get_mut()
            }
            Inner::Gzip(encoder) => {
                encoder.write_all(chunk)?;
                encoder.flush()?;
                encoder.get_mut()
            }
        };
        Ok(std::mem::take(out))
    }

    /// Ends the stream: the last bytes.
    pub(crate) fn finish(self) -> std::io::Result<Vec<u8>> {
        let out = match self.inner {
            Inner::Identity => Vec::new(),
            Inner::Zstd(encoder) => encoder.finish()?,
            Inner::Brotli(encoder) => encoder.into_inner(),
            Inner::Gzip(encoder) => encoder.finish()?,
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn decoded(coding: Coding, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Coding::Zstd => {
                zstd::stream::read::Decoder::new(bytes)
                    .unwrap()
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Brotli => {
                brotli::Decompressor::new(bytes, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Gzip => {
                flate2::read::GzDecoder::new(bytes)
                    .read_to_end(&mut out)
                    .unwrap();
            }
        }
        out
    }

    #[test]
    fn a_stream_compressed_chunk_by_chunk_decodes_to_its_bytes_c7() {
        let chunk = b"{\"id\":1,\"name\":\"item-00000000001\"},".repeat(200);
        for coding in Coding::PREFERRED {
            let mut encoder = StreamEncoder::new(coding).unwrap();
            let mut sent = Vec::new();
            for _ in 0..5 {
                let out = encoder.push(&chunk).unwrap();
                assert!(!out.is_empty(), "{coding:?}: each chunk is flushed");
                sent.extend_from_slice(&out);
            }
            sent.extend_from_slice(&encoder.finish().unwrap());
            assert_eq!(decoded(coding, &sent), chunk.repeat(5), "{coding:?}");
            assert!(sent.len() * 5 < chunk.len() * 5, "{coding:?} compresses");
            let whole = coding.encode(&chunk).unwrap();
            assert_eq!(decoded(coding, &whole), chunk, "{coding:?}");
        }
    }
}
