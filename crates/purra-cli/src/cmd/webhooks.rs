//! `purra webhooks list | retry`: the webhook deliveries a store has not made yet, and an
//! operator's retry of the failed ones (the gateway delivers; this only reads and reschedules).

use std::time::{SystemTime, UNIX_EPOCH};

use purra_core::{WebhookDeliveryView, WebhookQuery, WebhookState};
use serde_json::{json, Value};

use crate::cli::WebhooksCommand;
use crate::cmd::print_json;
use crate::cmd::store;
use crate::exit::Failure;

/// Runs one `purra webhooks` subcommand.
pub async fn run(command: WebhooksCommand) -> Result<(), Failure> {
    let args = command.store_args();
    let json_out = args.json;
    let (location, db) = store::open_located(args).await?;
    let outbox = db.outbox();
    match &command {
        WebhooksCommand::List {
            failed,
            endpoint,
            limit,
            ..
        } => {
            let mut query = WebhookQuery::all().limit(*limit);
            if *failed {
                query = query.state(WebhookState::Failed);
            }
            if let Some(e) = endpoint {
                query = query.endpoint(e.clone());
            }
            let listed = outbox
                .webhook_deliveries(query)
                .await
                .map_err(|e| store::failure("listing webhook deliveries", e))?;
            if json_out {
                let all: Vec<Value> = listed.iter().map(delivery_json).collect();
                print_json(&json!({ "deliveries": all }));
            } else if listed.is_empty() {
                println!("no webhook delivery waits in {}", location.shown());
            } else {
                let rows: Vec<Vec<String>> = listed
                    .iter()
                    .map(|d| {
                        vec![
                            d.msg_id.clone(),
                            crate::term::for_stdout(&d.endpoint).into_owned(),
                            d.event_type.to_string(),
                            d.state.as_str().to_owned(),
                            d.attempts.to_string(),
                            crate::term::for_stdout(d.last_error.as_deref().unwrap_or(""))
                                .into_owned(),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    crate::render::table(
                        &[
                            "ID",
                            "ENDPOINT",
                            "EVENT",
                            "STATE",
                            "ATTEMPTS",
                            "LAST FAILURE"
                        ],
                        &rows
                    )
                );
            }
        }
        WebhooksCommand::Retry { endpoint, .. } => {
            let n = outbox
                .retry_failed_webhooks(endpoint.clone())
                .await
                .map_err(|e| store::failure("retrying webhook deliveries", e))?;
            if json_out {
                print_json(&json!({ "retried": n }));
            } else {
                let (what, each) = if n == 1 {
                    ("failed delivery is", "it")
                } else {
                    ("failed deliveries are", "each")
                };
                println!(
                    "{n} {what} pending again: the gateway sends {each} under its own webhook-id"
                );
            }
        }
    }
    Ok(())
}

fn millis(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// The JSON form of one delivery (its payload as recorded, parsed).
fn delivery_json(d: &WebhookDeliveryView) -> Value {
    json!({
        "seq": d.seq,
        "id": d.msg_id,
        "endpoint": d.endpoint,
        "event": d.event_type.as_str(),
        "state": d.state.as_str(),
        "attempts": d.attempts,
        "createdAtMs": millis(d.created_at),
        "nextAtMs": d.next_at.map(millis),
        "lastStatus": d.last_status,
        "lastError": d.last_error,
        "payload": serde_json::from_str::<Value>(&d.payload).unwrap_or(Value::String(d.payload.clone())),
    })
}
