//! Where a request meets its caller's limits (the accounting is `crate::limits`'s): before its
//! body is read, once its known cost is validated, and its usage when its answer is complete.
//! A caller without limits (`Principal.limits` is `None`) passes each of these at its first
//! instruction.

use super::ctx::Ctx;
use super::outcome::Call;
use super::GatewayState;
use crate::auth::limits::Meter;
use crate::common::error::GatewayError;
use crate::common::Operation;

/// What an operation's usage limits count.
fn meter(op: Operation) -> Meter {
    match op {
        Operation::Speech => Meter::Characters,
        Operation::Images => Meter::Images,
        Operation::Rerank => Meter::Tokens,
    }
}

/// After authentication, before the body: `requests_per_minute`, a `concurrent` slot (kept in
/// the context until the answer has been sent), and the operation's usage not yet spent.
pub(crate) async fn admit(
    state: &GatewayState,
    ctx: &mut Ctx,
    op: Operation,
) -> Result<(), GatewayError> {
    let Some(p) = &ctx.principal else {
        return Ok(());
    };
    let Some(set) = &p.limits else {
        return Ok(());
    };
    let on_error = ctx.settings.auth.on_store_error();
    ctx.lease = state.limits.admit(&p.id, set, meter(op), on_error).await?;
    Ok(())
}

/// Once the body is validated: a cost known up front (speech characters, images asked for)
/// must fit in what is left.
pub(crate) async fn cost(call: &Call<'_>, op: Operation, cost: u64) -> Result<(), GatewayError> {
    let Some(p) = call.principal else {
        return Ok(());
    };
    let Some(set) = &p.limits else {
        return Ok(());
    };
    let meter = meter(op);
    if !set.counts(meter) {
        return Ok(());
    }
    let on_error = call.settings.auth.on_store_error();
    call.state
        .limits
        .check_usage(&p.id, set, meter, cost, on_error)
        .await
}

/// The answer is out: what the request is charged (its outcome's) is charged to its caller, and
/// its concurrent slot given back (one Redis call for both). Called once per request, from the
/// proxy layer's one place (`service.rs`).
pub(crate) async fn charge(state: &GatewayState, ctx: &mut Ctx) {
    let lease = ctx.lease.take();
    let (Some(p), Some(op)) = (&ctx.principal, ctx.operation) else {
        return;
    };
    let Some(set) = &p.limits else {
        return;
    };
    let u = ctx.charge;
    let used = match op {
        Operation::Speech => u.characters,
        Operation::Images => u.images,
        Operation::Rerank => u.tokens,
    };
    state
        .limits
        .charge(&p.id, set, meter(op), used, lease)
        .await;
}
