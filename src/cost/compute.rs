//! The arithmetic: a price and a usage make a [`Cost`], one function per operation, each trying
//! the units the price bills in the order that is most exact for that operation (the provider's
//! own figures before the gateway's estimates).

use super::usage::{ImagesMetered, Metered, Planned, RerankMetered, SpeechMetered};
use super::{Basis, Cost, NoCost};
use crate::api::rerank::QueryCounting;
use crate::caps::parse_size;
use crate::caps::prices::{megapixels, Amount, GroupRate, Price, TokenKind};
use crate::common::images::ImageUsage;

/// What a finished request cost at `price`.
pub(crate) fn of(price: &Price, used: &Metered<'_>) -> Result<Cost, NoCost> {
    match used {
        Metered::Speech(s) => speech(price, s),
        Metered::Images(i) => images(price, i),
        Metered::Rerank(r) => rerank(price, r),
    }
}

/// What a request is known to cost at `price` before the provider is called: characters of
/// speech, `n` images of a size and quality, a rerank request's search units or queries (or its
/// tokens as the gateway counts them). Always [`Basis::Gateway`]; `partial` names what only the
/// answer will tell (speech audio tokens).
pub(crate) fn known(price: &Price, planned: &Planned<'_>) -> Result<Cost, NoCost> {
    match *planned {
        Planned::Speech {
            characters,
            text_tokens,
        } => speech(
            price,
            &SpeechMetered {
                characters,
                text_tokens,
                reported: None,
            },
        ),
        Planned::Images {
            n,
            size,
            quality,
            input_pixels,
            unmeasured_inputs,
        } => images(
            price,
            &ImagesMetered {
                images: n,
                size,
                quality,
                input_pixels,
                unmeasured_inputs,
                reported: None,
            },
        ),
        Planned::Rerank {
            query_tokens,
            document_tokens,
            counting,
        } => {
            let docs = document_tokens.len() as u64;
            let query = match counting {
                QueryCounting::PerDocument => query_tokens.saturating_mul(docs),
                QueryCounting::Once => query_tokens,
            };
            let total = query.saturating_add(document_tokens.iter().sum());
            let usage = crate::api::rerank::Usage {
                total_tokens: total,
                query_tokens: query,
                documents_tokens: total - query,
            };
            rerank(
                price,
                &RerankMetered {
                    usage: &usage,
                    billed: false,
                    query_tokens,
                    document_tokens,
                    search_units: None,
                },
            )
        }
    }
}

/// A running sum of priced parts.
struct Sum<'p> {
    price: &'p Price,
    amount: Amount,
    basis: Basis,
    partial: Vec<String>,
}

impl<'p> Sum<'p> {
    fn new(price: &'p Price) -> Sum<'p> {
        Sum {
            price,
            amount: Amount::ZERO,
            basis: Basis::Provider,
            partial: Vec::new(),
        }
    }

    fn add(&mut self, amount: Amount, basis: Basis) {
        self.amount = self.amount.plus(amount);
        self.basis = self.basis.and(basis);
    }

    fn done(self) -> Result<Cost, NoCost> {
        Ok(Cost {
            amount: self.amount,
            currency: self.price.currency,
            basis: self.basis,
            partial: (!self.partial.is_empty()).then(|| self.partial.join("; ")),
        })
    }
}

/// The rate of `kind`, else of untyped `input` for an input kind.
fn token_rate(price: &Price, kind: TokenKind) -> Option<crate::caps::prices::Rate> {
    let t = price.tokens.as_ref()?;
    t.rate(kind).or_else(|| {
        matches!(kind, TokenKind::TextIn)
            .then(|| t.rate(TokenKind::Input))
            .flatten()
    })
}

fn not_billable(price: &Price, what: &str) -> NoCost {
    NoCost::NotBillable(format!(
        "the price bills {} and {what}",
        price.units().join(", ")
    ))
}

fn speech(price: &Price, s: &SpeechMetered) -> Result<Cost, NoCost> {
    let mut sum = Sum::new(price);
    if price.tokens.is_some() {
        let reported = s.reported.unwrap_or_default();
        let Some(text_in) = token_rate(price, TokenKind::TextIn) else {
            return Err(not_billable(price, "no rate for text input tokens"));
        };
        match reported.input_tokens {
            Some(t) => sum.add(text_in.of(t), Basis::Provider),
            None => sum.add(text_in.of(s.text_tokens), Basis::Gateway),
        }
        if let Some(audio_out) = token_rate(price, TokenKind::AudioOut) {
            match reported.output_tokens {
                Some(t) => sum.add(audio_out.of(t), Basis::Provider),
                None => sum.partial.push(
                    "audio output tokens: the provider did not report them (known only after \
                     the call, from the speech stream's final event)"
                        .into(),
                ),
            }
        }
        return sum.done();
    }
    if let Some(rate) = price.characters {
        sum.add(rate.of(s.characters), Basis::Gateway);
        return sum.done();
    }
    Err(not_billable(
        price,
        "speech is counted in characters or tokens",
    ))
}

fn images(price: &Price, i: &ImagesMetered<'_>) -> Result<Cost, NoCost> {
    if let (Some(_), Some(usage)) = (&price.tokens, i.reported) {
        return image_tokens(price, usage);
    }
    let mut sum = Sum::new(price);
    if let Some(rates) = &price.images {
        let Some(each) = rates.per_image(i.size, i.quality) else {
            return Err(NoCost::NotBillable(format!(
                "the price has no per-image figure for size {} and quality {}",
                i.size.unwrap_or("(not known)"),
                i.quality.unwrap_or("(not known)")
            )));
        };
        sum.add(each.times(i.images, 1), Basis::Gateway);
        return sum.done();
    }
    if let Some(mp) = price.megapixels {
        let Some((w, h)) = i.size.and_then(parse_size) else {
            return Err(NoCost::NotBillable(
                "megapixel pricing needs the images' size (WxH), and it is not known".into(),
            ));
        };
        let pixels = u64::from(w) * u64::from(h);
        sum.add(mp.output(pixels).times(i.images, 1), Basis::Gateway);
        let inputs = i.input_pixels.len() as u64 + i.unmeasured_inputs;
        if inputs > 0 {
            match mp.input {
                Some(rate) => {
                    let started: u64 = i.input_pixels.iter().map(|&p| megapixels(p)).sum();
                    sum.add(rate.times(started, 1), Basis::Gateway);
                    if i.unmeasured_inputs > 0 {
                        sum.partial.push(format!(
                            "{} input image(s) given by URL: their megapixels are not counted",
                            i.unmeasured_inputs
                        ));
                    }
                }
                None => sum
                    .partial
                    .push("input images: the price gives no rate for them".into()),
            }
        }
        return sum.done();
    }
    if price.tokens.is_some() {
        return Err(not_billable(
            price,
            "the provider reported no token usage (and there is no per-image figure)",
        ));
    }
    Err(not_billable(
        price,
        "images are counted per image or per megapixel",
    ))
}

/// Token-billed images (OpenAI's GPT image models): input by kind where the provider itemised
/// it, output images (and any text output) at their rates.
fn image_tokens(price: &Price, u: &ImageUsage) -> Result<Cost, NoCost> {
    let mut sum = Sum::new(price);
    let detail = |map: &std::collections::BTreeMap<String, u64>, k: &str| map.get(k).copied();
    let part = |kind: TokenKind, tokens: u64, sum: &mut Sum<'_>| -> Result<(), NoCost> {
        if tokens == 0 {
            return Ok(());
        }
        match token_rate(price, kind) {
            Some(rate) => {
                sum.add(rate.of(tokens), Basis::Provider);
                Ok(())
            }
            None => Err(not_billable(
                price,
                &format!("no rate for {} tokens", kind.as_str()),
            )),
        }
    };
    let (text_in, image_in) = (
        detail(&u.input_tokens_details, "text_tokens"),
        detail(&u.input_tokens_details, "image_tokens"),
    );
    if text_in.is_some() || image_in.is_some() {
        part(TokenKind::TextIn, text_in.unwrap_or(0), &mut sum)?;
        part(TokenKind::ImageIn, image_in.unwrap_or(0), &mut sum)?;
    } else {
        part(TokenKind::TextIn, u.input_tokens, &mut sum)?;
        if u.input_tokens > 0 {
            sum.partial.push(
                "input tokens were not itemised by kind: all are charged at the text rate".into(),
            );
        }
    }
    let (text_out, image_out) = (
        detail(&u.output_tokens_details, "text_tokens"),
        detail(&u.output_tokens_details, "image_tokens"),
    );
    if text_out.is_some() || image_out.is_some() {
        // Thinking tokens (Gemini's `thoughtsTokenCount`) are billed as text output.
        let reasoning = detail(&u.output_tokens_details, "reasoning_tokens").unwrap_or(0);
        let text_out = text_out.unwrap_or(0).saturating_add(reasoning);
        part(TokenKind::TextOut, text_out, &mut sum)?;
        part(TokenKind::ImageOut, image_out.unwrap_or(0), &mut sum)?;
    } else {
        part(TokenKind::ImageOut, u.output_tokens, &mut sum)?;
    }
    sum.done()
}

/// Groups (search units or queries) of a rerank request, by the gateway's reading of the rule.
fn groups(rate: &GroupRate, r: &RerankMetered<'_>) -> u64 {
    let chunks: u64 = r
        .document_tokens
        .iter()
        .map(|&d| rate.chunks_of(r.query_tokens, d))
        .sum();
    rate.groups(chunks)
}

fn rerank(price: &Price, r: &RerankMetered<'_>) -> Result<Cost, NoCost> {
    let mut sum = Sum::new(price);
    if let Some(rate) = price.search_units {
        match r.search_units.filter(|u| u.is_finite() && *u >= 0.0) {
            // A whole number in practice; a fraction is billed as the unit it starts.
            Some(units) => sum.add(
                rate.price.times(units.ceil() as u64, rate.per),
                Basis::Provider,
            ),
            None => sum.add(rate.price.times(groups(&rate, r), rate.per), Basis::Gateway),
        }
        return sum.done();
    }
    if let Some(rate) = price.queries {
        sum.add(rate.price.times(groups(&rate, r), rate.per), Basis::Gateway);
        return sum.done();
    }
    if let Some(rate) = token_rate(price, TokenKind::Input) {
        let basis = if r.billed {
            Basis::Provider
        } else {
            Basis::Gateway
        };
        sum.add(rate.of(r.usage.total_tokens), basis);
        return sum.done();
    }
    Err(not_billable(
        price,
        "rerank is counted in search units, queries or input tokens",
    ))
}
