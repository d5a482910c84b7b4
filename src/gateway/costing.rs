//! What a request cost, as the gateway reports it: the operations compute a [`RequestCost`] from
//! the answering target's price and what the answer used (`crate::cost` does the arithmetic), put
//! it in their [`Outcome`](super::outcome::Outcome), and carry it on the answer as the
//! `Switchyard-Cost` header; the proxy layer records it for the access line and the cost metric.
//!
//! The header's forms (README, "What a request cost"):
//!
//! ```text
//! Switchyard-Cost: 0.0185 USD; basis=gateway            exact, from the gateway's count
//! Switchyard-Cost: 0.0022 USD; basis=provider           exact, from the provider's figures
//! Switchyard-Cost: 0.000003 USD; basis=gateway; estimate  a lower bound (speech audio tokens
//!                                                          known only after the head went out)
//! Switchyard-Cost: unknown; reason=unpriced             the target has no price
//! Switchyard-Cost: unknown; reason=not_billable         its price does not bill what was used
//! Switchyard-Cost: unknown; reason=asynchronous         an image task accepted, not yet run
//! ```

use crate::catalog::Target;
use crate::cost::{self, Cost, Metered, NoCost, Planned};

/// The answer header that carries a request's cost.
pub(crate) const HEADER: &str = "Switchyard-Cost";

/// A request's cost, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequestCost {
    /// The cost (a lower bound when `partial` says what it leaves out).
    Known(Cost),
    /// The target that answered has no price (never taken as 0).
    Unpriced,
    /// The target's price bills units this request's usage does not give; why.
    NotBillable(String),
    /// An asynchronous image task: accepted here, its images made later.
    Asynchronous,
}

impl RequestCost {
    /// What a finished request cost at `target`'s price.
    pub(crate) fn of(target: &Target, used: &Metered<'_>) -> RequestCost {
        match &target.price {
            None => RequestCost::Unpriced,
            Some(price) => cost::of(price, used).into(),
        }
    }

    /// What a request is known to cost at `target`'s price before the answer is complete.
    pub(crate) fn known(target: &Target, planned: &Planned<'_>) -> RequestCost {
        match &target.price {
            None => RequestCost::Unpriced,
            Some(price) => cost::known(price, planned).into(),
        }
    }

    /// The cost, when known.
    pub(crate) fn cost(&self) -> Option<&Cost> {
        match self {
            RequestCost::Known(c) => Some(c),
            _ => None,
        }
    }

    /// Why there is no cost (`unpriced`, `not_billable`, `asynchronous`), when there is none.
    pub(crate) fn reason(&self) -> Option<&'static str> {
        match self {
            RequestCost::Known(_) => None,
            RequestCost::Unpriced => Some("unpriced"),
            RequestCost::NotBillable(_) => Some("not_billable"),
            RequestCost::Asynchronous => Some("asynchronous"),
        }
    }

    /// What the access line notes beside the figure: what a partial cost leaves out, or why
    /// there is none.
    pub(crate) fn note(&self) -> Option<&str> {
        match self {
            RequestCost::Known(c) => c.partial.as_deref(),
            RequestCost::Unpriced => Some("the target that answered has no price"),
            RequestCost::NotBillable(why) => Some(why),
            RequestCost::Asynchronous => {
                Some("an asynchronous image task: its images are made later")
            }
        }
    }

    /// The `Switchyard-Cost` header's value (module docs).
    pub(crate) fn header_value(&self) -> String {
        match self {
            RequestCost::Known(c) => format!(
                "{} {}; basis={}{}",
                c.amount,
                c.currency,
                c.basis.as_str(),
                if c.partial.is_some() {
                    "; estimate"
                } else {
                    ""
                }
            ),
            other => format!("unknown; reason={}", other.reason().unwrap_or("unknown")),
        }
    }

    /// The header, ready for an answer's head.
    pub(crate) fn header(&self) -> (&'static str, String) {
        (HEADER, self.header_value())
    }
}

impl From<Result<Cost, NoCost>> for RequestCost {
    fn from(r: Result<Cost, NoCost>) -> RequestCost {
        match r {
            Ok(c) => RequestCost::Known(c),
            Err(NoCost::NotBillable(why)) => RequestCost::NotBillable(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::prices::{Amount, Currency};
    use crate::cost::Basis;

    fn usd(text: &str, basis: Basis, partial: Option<&str>) -> RequestCost {
        RequestCost::Known(Cost {
            amount: Amount::parse(text).unwrap(),
            currency: Currency::parse("USD").unwrap(),
            basis,
            partial: partial.map(str::to_string),
        })
    }

    #[test]
    fn the_header_says_the_figure_its_basis_and_whether_it_is_an_estimate() {
        assert_eq!(
            usd("0.0185", Basis::Gateway, None).header_value(),
            "0.0185 USD; basis=gateway"
        );
        assert_eq!(
            usd("0.002", Basis::Provider, None).header_value(),
            "0.002 USD; basis=provider"
        );
        assert_eq!(
            usd("0.000003", Basis::Gateway, Some("audio tokens")).header_value(),
            "0.000003 USD; basis=gateway; estimate"
        );
        assert_eq!(
            RequestCost::Unpriced.header_value(),
            "unknown; reason=unpriced"
        );
        assert_eq!(
            RequestCost::NotBillable("x".into()).header_value(),
            "unknown; reason=not_billable"
        );
    }
}
