//! What a request cost, as the gateway reports it: the operations compute a [`RequestCost`] from
//! the answering target's price and what the answer used (`crate::cost` does the arithmetic), put
//! it in their `Outcome` (`outcome.rs`), and carry it on the answer as the
//! `Switchyard-Cost` header; the proxy layer records it for the access line and the cost metric.
//!
//! The header's forms (docs/guide/cost.md):
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

use crate::api::images::ImageResult;
use crate::catalog::{Model, Target};
use crate::cost::{self, Cost, ImagesMetered, Metered, NoCost, Planned};

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

    /// What a generation's images cost: each native call at the price of the target of `model`
    /// that served it (the calls of one fan-out may be served by different targets), from what
    /// it delivered and what its provider reported, else at the size and quality `asked`. The
    /// input images are counted once per call, since each call sends them.
    pub(crate) fn of_images(
        model: &Model,
        result: &ImageResult,
        asked: &ImagesAsked<'_>,
    ) -> RequestCost {
        let mut total: Option<Cost> = None;
        for part in &result.served {
            let Some(target) = model.targets.get(part.target) else {
                return RequestCost::NotBillable("the target that answered is not known".into());
            };
            let facts = part.facts.as_deref();
            let used = Metered::Images(ImagesMetered {
                images: part.images,
                size: facts.and_then(|f| f.size.as_deref()).or(Some(asked.size)),
                quality: facts.and_then(|f| f.quality.as_deref()).or(asked.quality),
                input_pixels: asked.input_pixels,
                unmeasured_inputs: asked.unmeasured_inputs,
                reported: facts.and_then(|f| f.usage.as_ref()),
            });
            let c = match RequestCost::of(target, &used) {
                RequestCost::Known(c) => c,
                other => return other,
            };
            total = match total {
                None => Some(c),
                Some(t) => match t.plus(c) {
                    Some(sum) => Some(sum),
                    None => {
                        return RequestCost::NotBillable(
                            "its calls were served by targets priced in different currencies"
                                .into(),
                        )
                    }
                },
            };
        }
        match total {
            Some(c) => RequestCost::Known(c),
            None => RequestCost::NotBillable("the target that answered is not known".into()),
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

/// What an image request asked, for its cost where the answer does not say: the size and
/// quality, and its input images' pixels (`unmeasured_inputs`: those given by URL, not measured).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImagesAsked<'a> {
    pub(crate) size: &'a str,
    pub(crate) quality: Option<&'a str>,
    pub(crate) input_pixels: &'a [u64],
    pub(crate) unmeasured_inputs: u64,
}

impl<'a> ImagesAsked<'a> {
    /// The pixels of `inputs` whose size their header gives, and how many are not measured.
    pub(crate) fn measure<'i>(
        inputs: impl Iterator<Item = &'i crate::common::image_input::ImageInput>,
    ) -> (Vec<u64>, u64) {
        let mut pixels = Vec::new();
        let mut unmeasured = 0;
        for input in inputs {
            match input.pixels() {
                Some(p) => pixels.push(p),
                None => unmeasured += 1,
            }
        }
        (pixels, unmeasured)
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
