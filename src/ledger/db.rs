//! One connection to the ledger's PostgreSQL, opened within a deadline, for the writer and for
//! `switchyard spend`. Plain TCP (or a Unix socket): the configuration refuses `sslmode=require`
//! (`config::ledger`).

use std::time::Duration;

use tokio_postgres::{Client, NoTls};

/// Connect to `url` within `timeout`; the connection's I/O runs on a task of its own until the
/// client is dropped or the server goes away. The error is the driver's text, put through the
/// logger's credential filter.
pub(crate) async fn connect(url: &str, timeout: Duration) -> Result<Client, String> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| clean(&e))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(timeout);
    }
    config.application_name("switchyard");
    let (client, connection) = tokio::time::timeout(timeout, config.connect(NoTls))
        .await
        .map_err(|_| format!("no connection within {} ms", timeout.as_millis()))?
        .map_err(|e| clean(&e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            log::debug!("ledger: connection ended: {}", clean(&e));
        }
    });
    Ok(client)
}

/// An error as text, its source included (tokio-postgres keeps the server's message there),
/// with every configured credential blanked.
pub(crate) fn clean(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    crate::logging::redact(&text).into_owned()
}
