//! Streamable HTTP sessions in the database (feature `sessions`): purra-protocol's
//! `SessionStore` contract, on a schema of its own.

use purra_protocol::session_store::check_contract;

use crate::support::open;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_session_store_meets_the_contract() {
    let schema = format!("t{}_sessions", std::process::id());
    let store = open(&schema).await.unwrap();
    check_contract(&store).await;
}
