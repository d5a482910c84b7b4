//! Connections to the tenants' database: the management API's one connection (opened when first
//! needed, opened again when it is found closed; its statements run one at a time, which an
//! operator's API needs no more than), and the sync task's, which also hears the notifications.
//! Each brings the tables to the newest version first (`schema::migrate`).

use std::time::Duration;

use tokio::sync::{mpsc, Mutex, MutexGuard};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::schema;
use super::store::{StoreError, Tables};
use crate::config::tenants::TenantsSettings;
use crate::ledger::db::clean;

/// Connect to `settings`' database within its timeout, with the tables migrated; when `notify`
/// is given, the channel's notifications are sent to it (and it is closed when the connection
/// ends, which is how the sync task learns of a lost database).
pub(crate) async fn open(
    settings: &TenantsSettings,
    notify: Option<mpsc::UnboundedSender<()>>,
) -> Result<Client, String> {
    let timeout = settings.timeout;
    let mut config: tokio_postgres::Config =
        settings.database_url.parse().map_err(|e| clean(&e))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(timeout);
    }
    config.application_name("switchyard tenants");
    let (mut client, mut connection) = tokio::time::timeout(timeout, config.connect(NoTls))
        .await
        .map_err(|_| format!("no connection within {} ms", timeout.as_millis()))?
        .map_err(|e| clean(&e))?;
    tokio::spawn(async move {
        // Polling the connection's messages is also what drives its I/O for the client.
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notification(_)) => {
                    if let Some(tx) = &notify {
                        let _ = tx.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    log::debug!("tenants: connection ended: {}", clean(&e));
                    break;
                }
            }
        }
    });
    let migrating = schema::migrate(&mut client, &settings.schema);
    match tokio::time::timeout(timeout.max(Duration::from_secs(10)), migrating).await {
        Ok(Ok(applied)) if !applied.is_empty() => {
            log::info!(
                "tenants: schema {} migrated to version(s) {applied:?}",
                settings.schema
            );
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(format!("migrating the tables: {e}")),
        Err(_) => return Err("migrating the tables took too long".into()),
    }
    Ok(client)
}

/// The management API's database: one connection, shared in turn.
pub(crate) struct AdminDb {
    settings: TenantsSettings,
    client: Mutex<Option<Client>>,
    /// The tables, in the configured schema.
    pub(crate) tables: Tables,
}

/// The connection, held for one request's statements.
pub(crate) type Conn<'a> = tokio::sync::MappedMutexGuard<'a, Client>;

impl AdminDb {
    /// The database of `settings` (connected when first used).
    pub(crate) fn new(settings: TenantsSettings) -> AdminDb {
        let tables = Tables {
            schema: settings.schema.clone(),
        };
        AdminDb {
            settings,
            client: Mutex::new(None),
            tables,
        }
    }

    /// The connection, opened (again) when there is none or it was closed.
    pub(crate) async fn conn(&self) -> Result<Conn<'_>, StoreError> {
        let mut guard: MutexGuard<'_, Option<Client>> = self.client.lock().await;
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = None;
            let client = open(&self.settings, None).await.map_err(StoreError::Db)?;
            *guard = Some(client);
        }
        MutexGuard::try_map(guard, Option::as_mut)
            .map_err(|_| StoreError::Db("no connection".into()))
    }

    /// The longest one request's statements may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.settings.timeout
    }
}
