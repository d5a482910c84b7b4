//! What a request cost, in money: a pure computation from a target's price
//! (`caps::prices::Price`) and what the request used ([`Metered`]), or — for budgets, before the
//! provider is called — what it is known to cost from the request alone ([`Planned`]).
//!
//! A [`Cost`] is an exact amount (nano-units of its currency) with its [`Basis`]: `provider` when
//! every quantity priced is one the provider reported (OpenAI's image and speech token usage,
//! Cohere's billed search units, a rerank provider's billed token total), `gateway` when any is
//! the gateway's own count (characters, images, its tokenizer's tokens, its reading of search
//! units). A cost that could not count everything the price bills (speech audio tokens known only
//! after the call) says what it left out in [`Cost::partial`]: it is a lower bound, never a
//! silent under-count. A price with no rate for what was used is [`NoCost`], never 0.
//!
//! - `usage`: the inputs, built from the usage types the request path already has;
//! - `compute`: the arithmetic, one function per operation.
//!
//! It sits above `caps` (prices), `api` (rerank usage), `common` (image usage) and `stream` (speech
//! usage), below `gateway`, which will call it.

mod compute;
mod usage;

pub(crate) use compute::{known, of};
pub(crate) use usage::{ImagesMetered, Metered, Planned, RerankMetered, SpeechMetered};

use serde::Serialize;

use crate::caps::prices::{Amount, Currency};

/// Where a cost's quantities came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Basis {
    /// Every quantity is the provider's own figure.
    Provider,
    /// At least one is the gateway's count (or its reading of the provider's billing rule).
    Gateway,
}

impl Basis {
    /// `provider` or `gateway`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Basis::Provider => "provider",
            Basis::Gateway => "gateway",
        }
    }

    /// The basis of a sum: the gateway's as soon as one part is.
    fn and(self, other: Basis) -> Basis {
        if self == Basis::Provider && other == Basis::Provider {
            Basis::Provider
        } else {
            Basis::Gateway
        }
    }
}

/// What a request cost (or is known to cost).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Cost {
    pub amount: Amount,
    pub currency: Currency,
    pub basis: Basis,
    /// What the amount leaves out, when it could not count everything the price bills (then it is
    /// a lower bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
}

impl Cost {
    /// The sum of two costs in one currency (`None` when their currencies differ): the
    /// provider's basis only when both are, and what either leaves out.
    pub(crate) fn plus(self, other: Cost) -> Option<Cost> {
        if self.currency != other.currency {
            return None;
        }
        let partial = match (self.partial, other.partial) {
            (Some(a), Some(b)) if a == b => Some(a),
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Some(Cost {
            amount: self.amount.plus(other.amount),
            currency: self.currency,
            basis: self.basis.and(other.basis),
            partial,
        })
    }
}

/// Why no cost could be computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoCost {
    /// The price bills in units this usage does not give, or the table lacks the entry it needs
    /// (an image size it does not list); the text says which.
    NotBillable(String),
}

impl std::fmt::Display for NoCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoCost::NotBillable(why) => f.write_str(why),
        }
    }
}

#[cfg(test)]
mod tests;
