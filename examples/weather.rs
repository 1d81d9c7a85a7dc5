//! A weather server over stdio: three typed tools (one with structured output), a resource, a
//! resource template and a typed prompt. `cargo run -p examples --example weather`.

use purra_protocol::types::{PromptMessage, Resource, ResourceContents, ResourceTemplate};
use purra_protocol::{HandlerResult, Json, RegistrationError, RequestCtx, Server};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct City {
    /// A city name, such as "Oslo".
    city: String,
}

#[derive(Deserialize, JsonSchema)]
struct Days {
    city: String,
    /// How many days ahead, 1 to 7.
    days: u8,
}

#[derive(Serialize, JsonSchema)]
struct Forecast {
    city: String,
    /// Daily highs in °C, from tomorrow.
    highs: Vec<f64>,
}

/// A made-up temperature, so the example needs no weather service.
fn celsius(city: &str, day: u8) -> f64 {
    (city.len() as f64 * 2.5 + f64::from(day)) % 30.0
}

async fn temperature(c: City, _: RequestCtx) -> HandlerResult<String> {
    Ok(format!("{}: {:.1} °C", c.city, celsius(&c.city, 0)))
}

async fn forecast(d: Days, _: RequestCtx) -> HandlerResult<Json<Forecast>> {
    if !(1..=7).contains(&d.days) {
        return Err(format!("days must be 1 to 7, not {}", d.days).into()); // isError
    }
    let highs = (1..=d.days).map(|day| celsius(&d.city, day)).collect();
    Ok(Json(Forecast {
        city: d.city,
        highs,
    })) // structuredContent, outputSchema
}

async fn alerts(c: City, _: RequestCtx) -> HandlerResult<String> {
    Ok(format!("No alerts for {}.", c.city))
}

async fn now(uri: String, c: City, _: RequestCtx) -> HandlerResult<ResourceContents> {
    Ok(ResourceContents::text(uri, celsius(&c.city, 0).to_string()))
}

async fn packing(c: City, _: RequestCtx) -> HandlerResult<PromptMessage> {
    let t = celsius(&c.city, 0);
    let text = format!("It is {t:.0} °C in {}: what should I pack?", c.city);
    Ok(PromptMessage::user(text))
}

/// The server, every definition registered.
pub fn server() -> Result<Server, RegistrationError> {
    let server = Server::builder("weather", "1.0.0").build();
    server
        .tool("temperature", "The temperature now, in °C", temperature)?
        .tool("forecast", "Daily highs for the next days", forecast)?
        .tool("alerts", "Active weather alerts", alerts)?
        .resource_template(ResourceTemplate::new("weather://{city}/now", "now"), now)?
        .prompt("packing", "What to pack for a city", packing)?
        .resource(
            Resource::new("weather://cities", "cities"),
            |uri, _| async { HandlerResult::Ok(ResourceContents::text(uri, "Lisbon\nOslo")) },
        );
    Ok(server)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), RegistrationError> {
    server()?.serve_stdio().await; // until EOF on stdin
    Ok(())
}
