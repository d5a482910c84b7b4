//! Where a request meets its caller's limits (the accounting is `crate::limits`'s): its
//! admission — for a rerank before its body is read, for speech and images once their body is
//! validated, together with what they are known to cost, in one check (one Redis round trip) —
//! and its usage and cost when its answer is complete. A caller without limits
//! (`Principal.limits` is `None`) passes each of these at its first instruction.
//!
//! Admitting speech and images only once their body is validated is what keeps them to one
//! round trip on their path (their known cost cannot be checked before): a bad body is answered
//! `400` before a caller over its limits would be answered `429`, and a caller over its limits
//! has its body (within the body limits) read before it is refused. Such a request holds no
//! `concurrent` slot while its body is read: its slot is taken by the check and held until its
//! answer has been sent. One whose body is refused is counted against `requests_per_minute` with
//! its end-of-request charge (off its path), as its admission would have counted it.
//!
//! A database key (issue 47) carries its tenant's limits beside its own: each is checked and
//! charged under its own scope (the key's principal, `tenant:<name>`), one check each, so a
//! tenant's budget spent through one key (on any instance sharing Redis) refuses every key of
//! it.
//!
//! Money budgets are counted in the budget's currency: a cost in another is converted by the
//! configuration's `currency_rates` (whose presence for every priced model the configuration
//! checked at load).

use super::ctx::Ctx;
use super::outcome::Call;
use super::GatewayState;
use crate::auth::limits::{LimitSet, Meter};
use crate::auth::Principal;
use crate::catalog::Model;
use crate::common::error::GatewayError;
use crate::common::Operation;
use crate::cost::{self, Planned};
use crate::engine::trace;
use crate::limits::Known;
use crate::money::{Amount, Currency, Rates};

/// What an operation's usage limits count.
fn meter(op: Operation) -> Meter {
    match op {
        Operation::Speech => Meter::Characters,
        Operation::Images => Meter::Images,
        Operation::Rerank => Meter::Tokens,
    }
}

/// Whether `op`'s requests are admitted with the check of what they are known to cost, once
/// their body is validated ([`cost`]), rather than before their body is read. Speech and images
/// know their use up front (characters, images asked for); a rerank's tokens are known only from
/// its answer.
fn admitted_with_known_cost(op: Operation) -> bool {
    match op {
        Operation::Speech | Operation::Images => true,
        Operation::Rerank => false,
    }
}

/// After authentication, before the body: a rerank is admitted — `requests_per_minute`, a
/// `concurrent` slot (kept in the context until the answer has been sent), and the operation's
/// usage and the money budget not yet spent. Speech and images wait for [`cost`].
pub(crate) async fn admit(
    state: &GatewayState,
    ctx: &mut Ctx,
    op: Operation,
) -> Result<(), GatewayError> {
    let Some(p) = &ctx.principal else {
        return Ok(());
    };
    if p.limits.is_none() && tenant_limits(p).is_none() {
        return Ok(());
    }
    if admitted_with_known_cost(op) {
        ctx.limits.pending = true;
        return Ok(());
    }
    let on_error = ctx.settings.auth.on_store_error();
    if let Some(set) = &p.limits {
        ctx.limits.lease = state
            .limits
            .admit(&p.id, set, meter(op), None, on_error)
            .await?;
    }
    if let Some((scope, set)) = tenant_limits(p) {
        ctx.limits.tenant_lease = state
            .limits
            .admit(scope, set, meter(op), None, on_error)
            .await?;
    }
    Ok(())
}

/// A database key's tenant's limits and the scope they are counted under (`tenant:<name>`),
/// when it has any: checked beside the key's own, one more check (one more Redis round trip).
fn tenant_limits(p: &Principal) -> Option<(&str, &LimitSet)> {
    let t = p.tenant.as_ref()?;
    Some((t.id.as_str(), t.limits.as_deref()?))
}

/// Whether the caller may use `model`: a database key's (and its tenant's) `allowed_models`,
/// judged by the name the request asked for (a successor serving a model past its shutdown is
/// allowed where the model asked for is). `403 model_not_allowed` otherwise.
pub(crate) fn allowed(call: &Call<'_>, model: &Model) -> Result<(), GatewayError> {
    let Some(p) = call.principal else {
        return Ok(());
    };
    let asked = model
        .lifecycle
        .taken_over_from
        .as_deref()
        .unwrap_or(&model.name);
    if p.may_use(asked) {
        Ok(())
    } else {
        Err(GatewayError::ModelNotAllowed {
            model: asked.to_string(),
        })
    }
}

/// Once the body is validated: the request is admitted ([`admit`]'s rules) and what it is known
/// to use up front (`used`: speech characters, images asked for) and to cost (`planned` at
/// `model`'s prices) must fit in what is left — one check. Answers the known cost checked against
/// the caller's money budget, in the budget's currency (`None`: no budget, or no cost known).
pub(crate) async fn cost(
    call: &mut Call<'_>,
    op: Operation,
    used: u64,
    model: &Model,
    planned: &Planned<'_>,
) -> Result<Option<(Amount, Currency)>, GatewayError> {
    allowed(call, model)?;
    let Some(p) = call.principal else {
        return Ok(None);
    };
    let tenant = tenant_limits(p);
    if p.limits.is_none() && tenant.is_none() {
        return Ok(None);
    }
    // Whatever it answers, the request has met its admission now (a store error passed as
    // `auth.limits_on_store_error` says, a refusal applied what it applies).
    call.limits.pending = false;
    let on_error = call.settings.auth.on_store_error();
    let rates = &call.settings.rates;
    let checked = |set: &LimitSet| {
        let currency = set.budget_currency();
        let money = currency.and_then(|c| known_cost(model, planned, rates, c));
        (Known { used, cost: money }, money.zip(currency))
    };
    let started = trace::now();
    let mut answer = None;
    if let Some(set) = &p.limits {
        let (known, money) = checked(set);
        let admitted = call
            .state
            .limits
            .admit(&p.id, set, meter(op), Some(known), on_error)
            .await;
        trace::step("limits", started, admitted.as_ref().err());
        call.limits.lease = admitted?;
        answer = money;
    }
    if let Some((scope, set)) = tenant {
        let (known, money) = checked(set);
        let admitted = call
            .state
            .limits
            .admit(scope, set, meter(op), Some(known), on_error)
            .await;
        trace::step("tenant_limits", started, admitted.as_ref().err());
        call.limits.tenant_lease = admitted?;
        answer = answer.or(money);
    }
    Ok(answer)
}

/// What a request planned as `planned` is known to cost at `model`, in `currency`: the highest
/// known cost among its enabled targets. The highest because the attempt loop may fail over to
/// any of them, so a request checked against a cheaper target's cost could still be served (and
/// charged) by a dearer one; checking the dearest keeps the charge within what was checked.
/// Targets with no price, or none for what is planned (`cost::NoCost`), are left out; `None`
/// when no target's cost is known (the request is then charged after the fact only).
pub(crate) fn known_cost(
    model: &Model,
    planned: &Planned<'_>,
    rates: &Rates,
    currency: Currency,
) -> Option<Amount> {
    model
        .enabled_targets()
        .filter_map(|t| {
            let c = cost::known(t.price.as_deref()?, planned).ok()?;
            rates.convert(c.amount, c.currency, currency)
        })
        .max()
}

/// The answer is out: what the request is charged (its outcome's usage, and its cost in the
/// budget's currency) is charged to its caller, and its concurrent slot given back (one Redis
/// call for all). Called once per request, from the proxy layer's one place (`service.rs`).
pub(crate) async fn charge(state: &GatewayState, ctx: &mut Ctx) {
    let lease = ctx.limits.lease.take();
    let tenant_lease = ctx.limits.tenant_lease.take();
    let unadmitted = std::mem::take(&mut ctx.limits.pending);
    let (Some(p), Some(op)) = (&ctx.principal, ctx.operation) else {
        return;
    };
    let u = ctx.charge;
    let used = match op {
        Operation::Speech => u.characters,
        Operation::Images => u.images,
        Operation::Rerank => u.tokens,
    };
    let rates = &ctx.settings.rates;
    if let Some(set) = &p.limits {
        let cost = money_charged(set, ctx.cost_charge, rates);
        state
            .limits
            .charge(&p.id, set, (meter(op), used), cost, lease, unadmitted)
            .await;
    }
    if let Some((scope, set)) = tenant_limits(p) {
        let cost = money_charged(set, ctx.cost_charge, rates);
        state
            .limits
            .charge(
                scope,
                set,
                (meter(op), used),
                cost,
                tenant_lease,
                unadmitted,
            )
            .await;
    }
}

/// `cost` in the currency of `set`'s budget (`None`: no budget, no cost, or no rate, which the
/// configuration's check at load rules out for every priced model).
fn money_charged(
    set: &LimitSet,
    cost: Option<(Amount, Currency)>,
    rates: &Rates,
) -> Option<Amount> {
    let budget = set.budget_currency()?;
    let (amount, currency) = cost?;
    let converted = rates.convert(amount, currency, budget);
    if converted.is_none() {
        log::warn!("limits: a cost in {currency} not counted: no rate into {budget}");
    }
    converted
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings(targets: &str) -> crate::config::Settings {
        let yaml = format!(
            r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  currency_rates: {{CNY: {{USD: "0.14"}}}}
  providers:
    openai: {{kind: openai, api_key: k, base_url: "https://api.openai.com/v1"}}
    off: {{kind: openai, api_key: "", base_url: "https://api.openai.com/v1"}}
  models:
    tts: {{family: openai-tts, targets: {targets}}}
"#
        );
        crate::config::load_str(&yaml, &|_| None).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn known(targets: &str, characters: u64, currency: &str) -> Option<Amount> {
        let s = settings(targets);
        let model = s.gateway.catalog.get("tts").unwrap();
        let planned = Planned::Speech {
            characters,
            text_tokens: 0,
        };
        known_cost(
            model,
            &planned,
            &s.gateway.rates,
            Currency::parse(currency).unwrap(),
        )
    }

    #[test]
    fn the_known_cost_is_the_dearest_enabled_targets_in_the_budgets_currency() {
        // tts-1: $15 per 1M characters; tts-1-hd: $30; 1,000 characters.
        let both = "[{provider: openai, model: tts-1}, {provider: openai, model: tts-1-hd}]";
        assert_eq!(known(both, 1_000, "USD"), Amount::parse("0.03"));
        // ¥300 per 1M at 0.14: $42 per 1M, the dearest once converted.
        let cny = "[{provider: openai, model: tts-1}, {provider: openai, model: tts-1, \
                   price: {currency: CNY, characters: {price: 300, per: 1000000}}}]";
        assert_eq!(known(cny, 1_000, "USD"), Amount::parse("0.042"));
        // A disabled provider's target cannot serve the request: its price is left out.
        let off = "[{provider: openai, model: tts-1}, {provider: off, model: tts-1-hd}]";
        assert_eq!(known(off, 1_000, "USD"), Amount::parse("0.015"));
        // No target priced: nothing known (charged after the fact only).
        let unpriced = "[{provider: openai, model: tts-1, price: unpriced}]";
        assert_eq!(known(unpriced, 1_000, "USD"), None);
    }

    #[test]
    fn a_charge_is_converted_into_the_budgets_currency() {
        let rates = settings("[{provider: openai, model: tts-1}]").gateway.rates;
        let set: LimitSet =
            serde_yaml::from_str("budget: {currency: USD, per_day: \"1\"}").unwrap();
        let (cny, usd) = (
            Currency::parse("CNY").unwrap(),
            Currency::parse("USD").unwrap(),
        );
        let one = Amount::parse("1").unwrap();
        assert_eq!(
            money_charged(&set, Some((one, cny)), &rates),
            Amount::parse("0.14")
        );
        assert_eq!(money_charged(&set, Some((one, usd)), &rates), Some(one));
        assert_eq!(money_charged(&set, None, &rates), None);
        assert_eq!(
            money_charged(&LimitSet::default(), Some((one, usd)), &rates),
            None
        );
    }
}
