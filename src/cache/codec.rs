//! An entry as bytes, for a store outside the process (Redis): a fixed header (magic, the
//! times and usage as little-endian `u64`s, the cost's nano-units and currency code, the body's
//! form, the provider's reported tokens with `u64::MAX` for none), then the body as it is. Decoding shares the body with the bytes read (no copy).
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use bytes::{BufMut, Bytes, BytesMut};

use super::{Entry, Form, Meta};
use crate::money::{Amount, Currency};

// Entries an older version wrote (`SYC1`) read as misses.
const MAGIC: &[u8; 4] = b"SYC2";
const HEADER: usize = 4 + 8 * 4 + 3 + 1 + 8 * 2;
/// A reported token count that is not there.
const NONE: u64 = u64::MAX;

/// `entry` as stored.
pub(super) fn encode(entry: &Entry) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(HEADER + entry.body.len());
    out.put_slice(MAGIC);
    out.put_u64_le(entry.meta.stored_at);
    out.put_u64_le(entry.meta.expires_at);
    out.put_u64_le(entry.meta.usage);
    match entry.meta.cost {
        Some((amount, currency)) => {
            out.put_u64_le(amount.nanos());
            out.put_slice(currency.as_str().as_bytes());
        }
        None => {
            out.put_u64_le(0);
            out.put_slice(b"---");
        }
    }
    out.put_u8(match entry.meta.form {
        Form::Body => 0,
        Form::Events => 1,
    });
    out.put_u64_le(entry.meta.tokens.0.unwrap_or(NONE));
    out.put_u64_le(entry.meta.tokens.1.unwrap_or(NONE));
    out.put_slice(&entry.body);
    out.to_vec()
}

/// The entry in `bytes` (`None`: not one this version wrote).
pub(super) fn decode(bytes: Bytes) -> Option<Entry> {
    if bytes.len() < HEADER || &bytes[..4] != MAGIC {
        return None;
    }
    let u = |i: usize| {
        let at = 4 + 8 * i;
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let code = std::str::from_utf8(&bytes[36..39]).ok()?;
    let cost = Currency::parse(code).map(|c| (Amount::from_nanos(u(3)), c));
    let form = match bytes[39] {
        0 => Form::Body,
        1 => Form::Events,
        _ => return None,
    };
    let tokens = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        Some(u64::from_le_bytes(b)).filter(|&n| n != NONE)
    };
    Some(Entry {
        meta: Meta {
            stored_at: u(0),
            expires_at: u(1),
            usage: u(2),
            cost,
            form,
            tokens: (tokens(40), tokens(48)),
        },
        body: bytes.slice(HEADER..),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let forms = [
            (Form::Body, (None, None)),
            (Form::Events, (Some(7), Some(0))),
        ];
        for (cost, (form, tokens)) in [
            None,
            Some((Amount::from_nanos(1234), Currency::parse("USD").unwrap())),
        ]
        .into_iter()
        .zip(forms)
        {
            let e = Entry {
                body: Bytes::from_static(b"ID3 audio"),
                meta: Meta {
                    stored_at: 1,
                    expires_at: 2,
                    usage: 3,
                    cost,
                    form,
                    tokens,
                },
            };
            assert_eq!(decode(Bytes::from(encode(&e))), Some(e));
        }
        assert_eq!(
            decode(Bytes::from_static(
                b"SYC0 and more bytes than a header, surely"
            )),
            None
        );
    }
}
