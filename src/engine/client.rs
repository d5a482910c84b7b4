//! Where a relayed speech answer is written: the client's session and, when the request leads
//! a response-cache flight, the requests following it (`cache::Leader`), which receive every
//! piece the client does as it is written.
//!
//! A leader whose own client goes away keeps reading the provider while anyone follows it: the
//! followers are owed the whole answer. Without followers a gone client ends the relay, as
//! before.

use bytes::Bytes;
use pingora::proxy::Session;

use crate::cache::Leader;
use crate::common::error::GatewayError;
use crate::stream::audio::SpeechUsage;

/// How a streamed copy ended badly.
pub(crate) enum StreamError {
    /// The provider failed mid-stream: the answer was cut short. For raw audio the connection
    /// must be dropped unfinished; an SSE stream has had its final `error` event written.
    Upstream(GatewayError),
    /// The client went away; nothing more can be sent.
    Client,
}

/// How a relay that reached its end (or its final error event) went.
#[derive(Debug, Default)]
pub(crate) struct Relayed {
    /// The usage the provider reported.
    pub(crate) usage: SpeechUsage,
    /// The answer ended as it should: the last byte of the provider's audio, an SSE stream's
    /// closing event (not an error event). Only such an answer is stored.
    pub(crate) complete: bool,
    /// The client went away while followers still read the answer: it was read to its end for
    /// them.
    pub(crate) client_gone: bool,
    /// The body's end is still to be written ([`Client::end`] of a leader): the caller stores
    /// the answer first, so a client that sends the same request the moment its answer ends
    /// finds it stored.
    pub(crate) end_pending: bool,
}

/// Told the length of an answer's last body write, just before it, when the body's end follows
/// at once (the connection may then send both together: `gateway/client_conn.rs`).
pub(crate) type LastFollows<'a> = &'a (dyn Fn(usize) + Sync);

/// The client's session and, when leading, the followers.
pub(crate) struct Client<'a> {
    session: &'a mut Session,
    leader: Option<&'a Leader>,
    gone: bool,
    end_pending: bool,
    last_follows: Option<LastFollows<'a>>,
}

impl<'a> Client<'a> {
    pub(crate) fn new(session: &'a mut Session, leader: Option<&'a Leader>) -> Client<'a> {
        Client {
            session,
            leader,
            gone: false,
            end_pending: false,
            last_follows: None,
        }
    }

    /// Tell `hook` of the last body write of an answer that ends at once ([`Client::finish_with`]).
    pub(crate) fn with_last_follows(mut self, hook: Option<LastFollows<'a>>) -> Client<'a> {
        self.last_follows = hook;
        self
    }

    /// Write `piece` as the body's last bytes and end the body.
    pub(crate) async fn finish_with(&mut self, piece: Bytes) -> Result<(), StreamError> {
        // A leader's end waits for its caller ([`Client::end`]): nothing may be held for it.
        if let (Some(hook), None, false) = (self.last_follows, self.leader, self.gone) {
            hook(piece.len());
        }
        self.write(piece, false).await?;
        self.end().await
    }

    /// Write a piece of the answer (`last`: and end the body).
    pub(crate) async fn write(&mut self, piece: Bytes, last: bool) -> Result<(), StreamError> {
        if let Some(leader) = self.leader {
            leader.push(&piece);
        }
        if self.gone {
            return Ok(());
        }
        match self.session.write_response_body(Some(piece), last).await {
            Ok(()) => Ok(()),
            Err(_) => self.lost(),
        }
    }

    /// End the body (a leader's end is left to its caller: [`Relayed::end_pending`]).
    pub(crate) async fn end(&mut self) -> Result<(), StreamError> {
        if self.gone {
            return Ok(());
        }
        if self.leader.is_some() {
            self.end_pending = true;
            return Ok(());
        }
        match self.session.write_response_body(None, true).await {
            Ok(()) => Ok(()),
            Err(_) => self.lost(),
        }
    }

    /// The client's write failed: the relay goes on for followers, else it ends.
    fn lost(&mut self) -> Result<(), StreamError> {
        if self.leader.is_some_and(Leader::followed) {
            self.gone = true;
            Ok(())
        } else {
            Err(StreamError::Client)
        }
    }

    /// The relay ended: how.
    pub(crate) fn relayed(&self, usage: SpeechUsage, complete: bool) -> Relayed {
        Relayed {
            usage,
            complete,
            client_gone: self.gone,
            end_pending: self.end_pending,
        }
    }
}
