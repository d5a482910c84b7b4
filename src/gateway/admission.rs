//! Load shedding for one entry point: caps on open connections and on requests in flight.
//!
//! Past either cap a request is answered at once with `503 overloaded` and `Retry-After`, before
//! authentication or its body is read, so an overloaded gateway spends almost nothing on it and
//! nothing waits in a queue. A connection over the connection cap is still accepted — refusing it
//! at accept would look like a network fault to the client — but every request on it is shed and it
//! is closed after the answer. Connections are counted by `server::edge`, requests by the gateway.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::common::error::GatewayError;

/// Why a request on a connection over the connection cap is shed.
pub(crate) const TOO_MANY_CONNECTIONS: &str = "too many open connections";
/// Why a request over the in-flight cap is shed.
pub(crate) const TOO_MANY_IN_FLIGHT: &str = "too many requests in flight";

/// One entry point's counters and caps.
#[derive(Debug)]
pub(crate) struct Admission {
    max_connections: usize,
    max_in_flight: usize,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    /// Peers whose connection is over the cap (only touched while `shedding` is above 0, so the
    /// lock is off the path of a gateway under its caps).
    shed: Mutex<HashSet<SocketAddr>>,
    shedding: AtomicUsize,
}

impl Admission {
    pub(crate) fn new(max_connections: usize, max_in_flight: usize) -> Arc<Admission> {
        Arc::new(Admission {
            max_connections,
            max_in_flight,
            connections: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            shed: Mutex::new(HashSet::new()),
            shedding: AtomicUsize::new(0),
        })
    }

    /// Count a newly accepted connection until the guard drops. `peer` (a system call) is asked
    /// only of a connection over the cap.
    pub(crate) fn connect(
        self: &Arc<Self>,
        peer: impl FnOnce() -> Option<SocketAddr>,
    ) -> Connection {
        let open = self.connections.fetch_add(1, Ordering::Relaxed) + 1;
        let over = open > self.max_connections;
        let shed = match over.then(peer).flatten() {
            Some(peer) => {
                self.shed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(peer);
                self.shedding.fetch_add(1, Ordering::Relaxed);
                Some(peer)
            }
            None => None,
        };
        Connection {
            admission: self.clone(),
            shed,
        }
    }

    /// Admit one request from `peer`, or refuse it with `503 overloaded`.
    /// `peer` (a system call, the first time on a connection) is asked only while some
    /// connection is over the cap.
    pub(crate) fn admit(
        self: &Arc<Self>,
        peer: impl FnOnce() -> Option<SocketAddr>,
    ) -> Result<InFlight, GatewayError> {
        if self.shedding.load(Ordering::Relaxed) > 0 {
            if let Some(peer) = peer() {
                let shed = self
                    .shed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&peer);
                if shed {
                    return Err(GatewayError::Overloaded(TOO_MANY_CONNECTIONS));
                }
            }
        }
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        let guard = InFlight {
            admission: self.clone(),
        };
        if now > self.max_in_flight {
            // The guard gives the slot back as it drops.
            return Err(GatewayError::Overloaded(TOO_MANY_IN_FLIGHT));
        }
        Ok(guard)
    }

    /// Open connections now.
    #[cfg(test)]
    pub(crate) fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Requests in flight now.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// An open connection, counted until dropped.
#[derive(Debug)]
pub(crate) struct Connection {
    admission: Arc<Admission>,
    shed: Option<SocketAddr>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(peer) = self.shed.take() {
            self.admission
                .shed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&peer);
            self.admission.shedding.fetch_sub(1, Ordering::Relaxed);
        }
        self.admission.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request in flight, counted until dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    admission: Arc<Admission>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.admission.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn in_flight_is_capped_and_freed() {
        let a = Admission::new(10, 2);
        let one = a.admit(|| None).unwrap();
        let _two = a.admit(|| None).unwrap();
        let third = a.admit(|| None).unwrap_err();
        assert_eq!((third.status(), third.code()), (503, "overloaded"));
        assert_eq!(a.in_flight(), 2, "a refused request holds no slot");
        drop(one);
        assert!(a.admit(|| None).is_ok());
    }

    #[test]
    fn connections_past_the_cap_are_shed_until_they_close() {
        let a = Admission::new(1, 10);
        let first = a.connect(|| Some(peer(1)));
        let second = a.connect(|| Some(peer(2)));
        assert!(a.admit(|| Some(peer(1))).is_ok());
        assert_eq!(a.admit(|| Some(peer(2))).unwrap_err().code(), "overloaded");
        drop(second);
        drop(first);
        assert_eq!(a.connections(), 0);
        let _third = a.connect(|| Some(peer(2)));
        assert!(
            a.admit(|| Some(peer(2))).is_ok(),
            "the peer's new connection is under the cap"
        );
    }
}
