//! Helpers shared by purra-postgres's integration tests: the test command's PostgreSQL server
//! (`PURRA_TEST_POSTGRES`), a direct connection to a schema and the store opened on one.

use purra_core::StoreError;
use purra_postgres::{PostgresOptions, PostgresStore};

/// The server's URL; without it the tests fail (they never skip).
pub fn url() -> String {
    std::env::var("PURRA_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "PURRA_TEST_POSTGRES is not set: run the tests with scripts/test.sh, or start a server \
             with `eval \"$(scripts/postgres.sh start DIR)\"` first"
        )
    })
}

/// A direct connection to `schema`, around the store.
pub async fn raw(schema: &str) -> tokio_postgres::Client {
    let mut config: tokio_postgres::Config = url().parse().unwrap();
    config.options(format!("-c search_path={schema}"));
    let (client, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// The store on `schema` of the test server.
pub async fn open(schema: &str) -> Result<PostgresStore, StoreError> {
    PostgresStore::connect_with(&url(), PostgresOptions::default().schema(schema)).await
}
